#!/bin/bash
# One device call for register bounds (issue 9): the 8-token Q4_K / Q6_K matvec tile (DS4_CUDA_MATVEC_MB: 195
# registers unbounded, 12.5 % occupancy) and the split-activation MoE kernels (DS4_CUDA_SPLIT_MB="gate+up,down":
# 72 and 84 registers unbounded) under __launch_bounds__ minimum-block counts, each against the defaults on
# ds4-bench decode of the Qwen3-30B-A3B-shaped q4_k_m file (ctx 512, 8 and 32 sequences; the defaults three times
# to show the spread). The bounds change register allocation only, not arithmetic: the Matmul and MoE op tests run
# under each knob to show the same results. Recorded in bench/logs/2026-12-03-h200-bounds on d64ac7a, whose
# defaults were both unbounded; since then the defaults are MATVEC_MB=4 and SPLIT_MB=0,2 (its winners), so "base"
# is those and MATVEC_MB=0 / SPLIT_MB=0,0 are the old kernels.
#
# Here: bash bench/cuda-split-ab.sh --pack build     (the same pack: .gpu/split.tar.xz)
# There (carry [".gpu"]): bash bench/cuda-bounds-ab.sh .gpu   (output under $OUT, summary on stdout)
set -u
src=$(cd "${1:?usage: bench/cuda-bounds-ab.sh FOLDER}" && pwd)
T0=$(date +%s); O=${OUT:-/tmp/out}; mkdir -p "$O"; W=$(mktemp -d)
B=$(mktemp -d); xz -dc "$src/split.tar.xz" | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B DS4_BIN=$B
{ nvidia-smi -L; cat "$B/commit"; } > "$O/summary.txt" 2>&1
f=/dev/shm/q30b-q4km.gguf
( [ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
    --out "$f" > "$W/synth.log" 2>&1 ) &
( cd "$B"
  for v in "MATVEC_MB=1" "MATVEC_MB=3" "MATVEC_MB=4" "SPLIT_MB=8,0" "SPLIT_MB=10,0" "SPLIT_MB=0,2" "SPLIT_MB=1,1"; do
    ( env "DS4_CUDA_$v" timeout 200 ./cudabackend_ops_test --gtest_filter='*Moe*:*Matmul*' > "$W/ops-$v.txt" 2>&1
      echo "ops *Moe*:*Matmul* under $v rc=$?" >> "$W/ops-$v.txt" ) &
  done; wait )
wait
{ echo "== tests ($(( $(date +%s) - T0 )) s)"; grep -h "rc=" "$W"/ops-*.txt; } >> "$O/summary.txt"
run() {  # label, env assignment, ds4-bench args
  local label=$1 v=$2; shift 2
  env $v timeout 120 "$B/ds4-bench" -m "$f" --backend cuda --gen-tokens 128 --prefill-chunk 512 --ctx-start 512 \
    --ctx-max 512 --step-incr 1 "$@" > "$W/$label.csv" 2> "$W/$label.log"
  echo "$label ($v): $(grep -v '^ctx' "$W/$label.csv" | tr '\n' ' ')" >> "$O/summary.txt"
}
echo "== ds4-bench decode ($(( $(date +%s) - T0 )) s)" >> "$O/summary.txt"
for n in 8 32; do
  run base-a$n "DS4_NONE=1" --parallel $n
  for v in MATVEC_MB=1 MATVEC_MB=3 MATVEC_MB=4; do run "m${v#*=}-$n" "DS4_CUDA_$v" --parallel $n; done
  run base-b$n "DS4_NONE=1" --parallel $n
  for v in SPLIT_MB=8,0 SPLIT_MB=10,0 SPLIT_MB=0,2 SPLIT_MB=1,1; do run "s${v#*=}-$n" "DS4_CUDA_$v" --parallel $n; done
  run base-c$n "DS4_NONE=1" --parallel $n
done
run base-1 "DS4_NONE=1"
echo "== done ($(( $(date +%s) - T0 )) s)" >> "$O/summary.txt"
tar cJf "$O/logs.tar.xz" -C "$W" . ; cat "$O/summary.txt"
