#!/bin/bash
# One device call for the launch-overlap step (issue 13/9): kernels let their successor be scheduled as soon as
# they pass their own wait (griddepcontrol.launch_dependents in wait_for_inputs), and the attention merge takes
# each split's factor from shared memory. Runs every CUDA test binary (the correctness pack of
# bench/cuda-correctness.sh) and compute-sanitizer memcheck of the attention/matmul op tests and the tiny model
# tests, then ds4-bench decode, interleaved:
#   b  the base binary (the commit before, .gpurun/base.tar.xz)      d  this commit, defaults
#   p  this commit with DS4_CUDA_PDL=0 (no programmatic launches)    g  this commit with DS4_CUDA_ATTN_GQA=0
# on the Qwen3-30B-A3B-shaped q4_k_m file at ctx 512 (N = 1, 8, 32 sequences), 4096 and 16384 (N = 1), and DeepSeek V4
# Flash q2 (8 blocks) at ctx 512; last, ncu's per-kernel table of a decode step (4-block Qwen3 file) for d at
# N = 1 and 8 and g at N = 1.
#
# Here: bash bench/cuda-correctness.sh --pack BUILD      (.gpurun/pk.tar.xz, q4km.gguf, glm-routed.gguf)
#       bash bench/cuda-pdl-ab.sh --pack-base BASE_BUILD (.gpurun/base.tar.xz: ds4-bench of the commit before)
# There (carry [".gpurun"]): bash bench/cuda-pdl-ab.sh .gpurun   (output under $OUT, summary on stdout)
set -u
if [ "${1:-}" = "--pack-base" ]; then
  build=${2:?usage: bench/cuda-pdl-ab.sh --pack-base BUILD_DIR}
  repo=$(cd "$(dirname "$0")/.." && pwd); st=$(mktemp -d); mkdir -p "$repo/.gpurun"
  cp "$build/ds4-bench" "$st/" && strip "$st/ds4-bench" || exit 1
  git -C "$build/.." rev-parse HEAD > "$st/commit" 2>/dev/null
  tar cf - -C "$st" . | xz -9 -T1 > "$repo/.gpurun/base.tar.xz" && rm -rf "$st"; du -sh "$repo/.gpurun/base.tar.xz"
  exit 0
fi
src=$(cd "${1:?usage: bench/cuda-pdl-ab.sh FOLDER | --pack-base BUILD_DIR}" && pwd)
T0=$(date +%s); O=${OUT:-/tmp/out}; mkdir -p "$O"; W=$(mktemp -d)
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"
BB=$(mktemp -d); xz -dc "$src/base.tar.xz" | tar xf - -C "$BB"
export LD_LIBRARY_PATH=$B DS4_BIN=$B DS4_CUDA_TEST_Q4KM=$src/q4km.gguf DS4_CUDA_TEST_GLM=$src/glm-routed.gguf
S=$O/summary.txt; { nvidia-smi -L; echo "this: $(head -1 "$B/commit")"; echo "base: $(cat "$BB/commit")"; } > "$S" 2>&1
el() { echo "$(( $(date +%s) - T0 )) s"; }
f=/dev/shm/q30b-q4km.gguf; f4=/dev/shm/q30b-q4km-4l.gguf; fd=/dev/shm/flash-q2-8l.gguf
( "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out "$f"
  "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 4 --no-tokenizer --seed 1 --out "$f4"
  "$B/ds4-gguf" synth --arch deepseek4 --preset flash --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out "$fd"
) > "$W/synth.log" 2>&1 &
synth=$!
( cd "$B"
  for t in cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test \
           cudabackend_glm_dsa_ops_test cudabackend_glm_dsa_model_test; do
    ( timeout 240 "./$t" > "$W/$t.txt" 2>&1; echo "$t rc=$?" >> "$W/$t.txt" ) &
  done
  ( timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 ./cudabackend_ops_test \
      --gtest_filter='*Attention*:*Matmul*:*Norm*:*Moe*' > "$W/memcheck-ops.txt" 2>&1
    echo "memcheck ops rc=$?" >> "$W/memcheck-ops.txt" ) &
  ( timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 ./cudabackend_model_test \
      --gtest_filter='-*RealShape*:*LlamaGenerator*' > "$W/memcheck-model.txt" 2>&1
    echo "memcheck model rc=$?" >> "$W/memcheck-model.txt" ) &
  wait )
{ echo "== tests ($(el))"
  grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|ERROR SUMMARY|qwen3-30b-a3b|worst" "$W"/cudabackend_*.txt "$W"/memcheck-*.txt |
    head -60; } >> "$S"
wait $synth
late() { [ $(( $(date +%s) - T0 )) -gt ${DS4_CALL_BUDGET:-540} ]; }  # the device call's 600 s, less the upload
run() {  # label, binary dir, env (space-separated, "" for none), file, ds4-bench args...
  local label=$1 bin=$2 v=$3 file=$4; shift 4
  late && { echo "$label: skipped (call budget)" >> "$S"; return; }
  env $v timeout 120 "$bin/ds4-bench" -m "$file" --backend cuda --prefill-chunk 512 "$@" > "$W/$label.csv" \
    2> "$W/$label.log"; echo "$label: $(grep -v '^ctx' "$W/$label.csv" | tr '\n' ' ')" >> "$S"
}
echo "== ds4-bench decode, Qwen3-30B-A3B q4_k_m ($(el)): b base, d this, p this without PDL, g this without the grouped attention" >> "$S"
c512=(--gen-tokens 128 --ctx-start 512 --ctx-max 512 --step-incr 1)
for round in 1 2; do
  for n in 1 8 32; do
    [ $round = 2 ] && [ $n = 32 ] && continue
    p=(); [ $n -gt 1 ] && p=(--parallel $n)
    run b$n-$round "$BB" "" "$f" "${c512[@]}" "${p[@]}"; run d$n-$round "$B" "" "$f" "${c512[@]}" "${p[@]}"
    run p$n-$round "$B" "DS4_CUDA_PDL=0" "$f" "${c512[@]}" "${p[@]}"
    run g$n-$round "$B" "DS4_CUDA_ATTN_GQA=0" "$f" "${c512[@]}" "${p[@]}"
  done
done
c4k=(--gen-tokens 128 --ctx-start 4096 --ctx-max 4096 --step-incr 1)
run b1-4k "$BB" "" "$f" "${c4k[@]}"; run d1-4k "$B" "" "$f" "${c4k[@]}"; run g1-4k "$B" "DS4_CUDA_ATTN_GQA=0" "$f" "${c4k[@]}"
c16k=(--gen-tokens 64 --ctx-start 16384 --ctx-max 16384 --step-incr 1)
run b1-16k "$BB" "" "$f" "${c16k[@]}"; run d1-16k "$B" "" "$f" "${c16k[@]}"
echo "== DeepSeek V4 Flash q2, 8 blocks ($(el))" >> "$S"
cd5=(--gen-tokens 64 --ctx-start 512 --ctx-max 512 --step-incr 1)
run dsv4-b1 "$BB" "" "$fd" "${cd5[@]}"; run dsv4-d1 "$B" "" "$fd" "${cd5[@]}"; run dsv4-p1 "$B" "DS4_CUDA_PDL=0" "$fd" "${cd5[@]}"
run dsv4-b8 "$BB" "" "$fd" "${cd5[@]}" --parallel 8; run dsv4-d8 "$B" "" "$fd" "${cd5[@]}" --parallel 8
echo "== ncu per-kernel decode step, 4-block file ($(el))" >> "$S"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for cfg in "d 1" "d 8" "g 1"; do
  late && break
  set -- $cfg; v=; [ $1 = g ] && v=DS4_CUDA_ATTN_GQA=0
  env $v timeout 100 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size \
    --csv --page raw "$B/ds4-bench" -m "$f4" --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 4 \
    --prefill-chunk 512 --parallel $2 > "$O/ncu-$1$2.csv" 2> "$W/ncu-$1$2.log"
  echo "-- $1 N=$2 (rc=$?)" >> "$S"
  python3 "$(dirname "$0")/ncu_step_table.py" "$O/ncu-$1$2.csv" >> "$S" 2>&1
done
echo "== done ($(el))" >> "$S"
tar cJf "$O/logs.tar.xz" -C "$W" . ; cat "$S"
