#!/bin/bash
# Session 2026-12-04d call 1: branch cuda-glm-pdl (b045c96) on the GPU: the previous session's call 7 (GLM's and
# DeepSeek V4's remaining kernels through launch() with PDL; DS4_CUDA_STEP_ALL=1 A/B), a GLM op profile, then the
# pipeline on the H200 (bench/pipeline-h200.sh: decode with the hop stream and with unary calls, 4k prefill).
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
unset DS4_CUDA_STEP_TIMING
for n in 1 65; do
  DS4_CUDA_PROFILE=1 timeout 30 ./ds4-bench -m /dev/shm/g.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens $n --prefill-chunk 512 > /dev/null 2> $O/glm-p$n.txt
done
echo "bench+profile $(el) s"
cd $R; mkdir -p $O/pipe; OUT=$O/pipe timeout 300 bash bench/pipeline-h200.sh .gpurun-pipe
tar cf $O/pipe.tar -C $O pipe && rm -rf $O/pipe
echo "all done $(el) s"
