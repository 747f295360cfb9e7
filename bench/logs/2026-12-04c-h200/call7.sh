#!/bin/bash
# Session 2026-12-04c call 7: GLM's and DeepSeek V4's remaining kernels (latent attention, indexer, layer norm,
# routing, rows; window attention, compressor, hyper-connections, plans) launched with PDL like the rest; DS4_CUDA_STEP_ALL=1 A/B (one-token products of Q4_K/Q6_K/Q8_0/F16/F32 on the step kernel).
set -u
R=$PWD; O=${OUT:-/tmp/out}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
export LD_LIBRARY_PATH=$B DS4_BIN=$B DS4_CUDA_TEST_GLM=$R/.gpurun/glm-routed.gguf
cd $B
( ./ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out /dev/shm/g.gguf > $O/synth-g.txt 2>&1 ) &
( ./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --seed 1 --no-tokenizer --out /dev/shm/q.gguf > $O/synth-q.txt 2>&1 ) &
( timeout 90 ./cudabackend_dsv4_ops_test > $O/t-dsv4ops.txt 2>&1; echo "dsv4ops rc=$?" >> $O/t-dsv4ops.txt
  timeout 120 ./cudabackend_dsv4_model_test --gtest_filter='-*RealShape*' > $O/t-dsv4.txt 2>&1; echo "dsv4 rc=$?" >> $O/t-dsv4.txt ) &
( DS4_CUDA_STEP_ALL=1 timeout 60 ./cudabackend_ops_test --gtest_filter='*Typed*Matmul*' > $O/t-stepall.txt 2>&1; echo "stepall rc=$?" >> $O/t-stepall.txt ) &
( timeout 60 ./cudabackend_glm_dsa_ops_test > $O/t-glmops.txt 2>&1; echo "glmops rc=$?" >> $O/t-glmops.txt
  timeout 90 ./cudabackend_glm_dsa_model_test > $O/t-glm.txt 2>&1; echo "glm rc=$?" >> $O/t-glm.txt )
wait
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure" $O/t-*.txt; echo "tests $(el) s"
b() { timeout 30 ./ds4-bench -m $1 --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512 2>&1 | grep -E "ctx  |step timing" | sed "s/^/$2: /"; }
export DS4_CUDA_STEP_TIMING=1
b /dev/shm/g.gguf "glm"
DS4_CUDA_STEP_ALL=1 b /dev/shm/g.gguf "glm stepall"
b /dev/shm/q.gguf "qwen3"
DS4_CUDA_STEP_ALL=1 b /dev/shm/q.gguf "qwen3 stepall"
echo "all done $(el) s"
