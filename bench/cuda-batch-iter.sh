#!/bin/bash
# One device call for a batched-decode change (issue 9): the four CUDA test binaries (real-shape cases left out),
# attention with the per-head kernel forced, then ds4-bench decode on the Qwen3-30B-A3B-shaped q4_k_m file at
# N = 1 (ctx 512 and 4096), 8, 16 and 32 sequences, float and int8 activations, with A/B runs of the env
# switches given in DS4_AB (e.g. "DS4_CUDA_MOE_GROUPED=0"), and ncu's per-kernel step table at N = 8.
#
# Here: bash bench/cuda-correctness.sh --pack build; cp bench/*.sh .gpurun/
# There (carry [".gpurun"]): bash .gpurun/cuda-batch-iter.sh   (output under $OUT, summary on stdout)
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf DS4_BIN=$B
f=/dev/shm/q30b-q4km.gguf
( [ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
    --out "$f" > "$O/synth.log" 2>&1 ) &
cd "$B"
for t in cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test; do
  timeout 200 ./$t --gtest_filter='-*RealShape*' > "$O/$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "^\[  (PASSED|FAILED) |Failure|worst" "$O/$t.txt" | head -8
done
for g in 0 1; do
  DS4_CUDA_MOE_GROUPED=$g timeout 100 ./cudabackend_ops_test --gtest_filter='*Moe*:*Matmul*' > "$O/ops-grouped$g.txt" 2>&1
  echo "ops moe/matmul grouped=$g rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" "$O/ops-grouped$g.txt" | head -4
done
cd - >/dev/null; wait
bench() {  # label, env..., -- ds4-bench args
  local label=$1; shift; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 120 "$B/ds4-bench" -m "$f" --backend cuda --gen-tokens 128 --prefill-chunk 512 "$@" \
    > "$O/b-$label.csv" 2> "$O/b-$label.log"; echo "$label: $(grep -v '^ctx' "$O/b-$label.csv" | tr '\n' ' ')"
}
w512=(--ctx-start 512 --ctx-max 512 --step-incr 1)
bench f1 X=1 -- "${w512[@]}"
bench f1-4096 X=1 -- --ctx-start 4096 --ctx-max 4096 --step-incr 1
for n in 8 16 32; do bench f$n X=1 -- "${w512[@]}" --parallel $n; done
bench i1 X=1 -- "${w512[@]}" --int8-activations
bench i8 X=1 -- "${w512[@]}" --int8-activations --parallel 8
for ab in ${DS4_AB:-}; do
  bench "f1-$ab" "$ab" -- "${w512[@]}"; bench "f8-$ab" "$ab" -- "${w512[@]}" --parallel 8
  bench "f1-4096-$ab" "$ab" -- --ctx-start 4096 --ctx-max 4096 --step-incr 1
done
[ "${DS4_NCU:-1}" = 1 ] && bash .gpurun/cuda-ncu-step.sh 8 2>&1 | head -60
