#!/bin/bash
# One device call for batched decode (issue 9): the CUDA tests (real-shape cases left out), both MoE batch paths
# forced, memcheck of the batch tests, and decode at 1, 8, 32 sequences (float) and 32 (int8, grouped vs per pair).
#
# Here: bash bench/cuda-correctness.sh --pack build; cp bench/cuda-batched-check.sh .gpurun/
# There (carry [".gpurun"]): bash .gpurun/cuda-batched-check.sh   (output under $OUT)
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf DS4_BIN=$B
f=/dev/shm/q30b-q4km.gguf
( "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out "$f" > "$O/synth.log" 2>&1 ) &
cd "$B"
for t in cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test; do
  timeout 150 ./$t --gtest_filter='-*RealShape*' > "$O/$t.txt" 2>&1; echo "$t rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" "$O/$t.txt" | head -6
done
for g in 0 1; do
  DS4_CUDA_MOE_GROUPED=$g timeout 100 ./cudabackend_ops_test --gtest_filter='*Moe*' > "$O/ops-grouped$g.txt" 2>&1
  echo "ops moe grouped=$g rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" "$O/ops-grouped$g.txt" | head -4
done
DS4_CUDA_MOE_GROUPED=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 ./cudabackend_ops_test \
  --gtest_filter='CudaOps.MoeBatch*:CudaInt8Ops.MoeBatch*:*/CudaTypedOps.MatmulBatchRows*/Q4_K' > "$O/memcheck-batch.txt" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) " "$O/memcheck-batch.txt"
cd - >/dev/null; wait
for n in 1 8 32; do
  timeout 100 "$B/ds4-bench" -m "$f" --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 \
    --prefill-chunk 512 --parallel $n > "$O/par-$n.csv" 2> "$O/par-$n.log"; echo "float N=$n: $(tail -1 "$O/par-$n.csv")"
done
for g in auto 0; do
  DS4_CUDA_MOE_GROUPED=$([ $g = auto ] && echo 2 || echo 0) timeout 100 "$B/ds4-bench" -m "$f" --backend cuda --int8-activations \
    --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512 --parallel 32 > "$O/int8-32-$g.csv" 2> "$O/int8-32-$g.log"
  echo "int8 N=32 grouped=$g: $(tail -1 "$O/int8-32-$g.csv")"
done
