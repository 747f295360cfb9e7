#!/bin/bash
# End-of-step device call for batched decode (issue 9): ds4-bench decode at N = 1..64 sequences (float) and 1, 8,
# 32 (int8 activations) on the Qwen3-30B-A3B-shaped q4_k_m file at ctx 512 (N = 1 also at 4096), then
# compute-sanitizer memcheck over the four CUDA test binaries (real-shape cases left out), the four at once.
#
# Here: bash bench/cuda-correctness.sh --pack build; cp bench/*.sh .gpurun/
# There (carry [".gpurun"]): bash .gpurun/cuda-final-check.sh   (output under $OUT, summary on stdout)
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf DS4_BIN=$B
f=/dev/shm/q30b-q4km.gguf
[ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
    --out "$f" > "$O/synth.log" 2>&1
run() {  # label, ds4-bench args
  local label=$1; shift
  timeout 120 "$B/ds4-bench" -m "$f" --backend cuda --gen-tokens 128 --prefill-chunk 512 "$@" > "$O/$label.csv" \
    2> "$O/$label.log"; echo "$label: $(grep -v '^ctx' "$O/$label.csv" | tr '\n' ' ')"
}
w=(--ctx-start 512 --ctx-max 512 --step-incr 1)
run f1 "${w[@]}"; run f1-4096 --ctx-start 4096 --ctx-max 4096 --step-incr 1
for n in 2 4 8 16 32 64; do run f$n "${w[@]}" --parallel $n; done
for n in 1 8 32; do run i$n "${w[@]}" --parallel $n --int8-activations; done
cd "$B"
for t in cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test; do
  ( timeout ${DS4_MEMCHECK_TIMEOUT:-400} compute-sanitizer --tool memcheck --error-exitcode 9 "./$t" \
      --gtest_filter='-*RealShape*' > "$O/memcheck-$t.txt" 2>&1; echo "memcheck $t rc=$?" >> "$O/memcheck-$t.txt" ) &
done
wait
grep -hE "ERROR SUMMARY|rc=|^\[  (PASSED|FAILED) " "$O"/memcheck-*.txt
