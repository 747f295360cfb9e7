#!/bin/bash
# Session 2026-12-04c call 3: split-K latent attention (GLM decode), Q2_K/Q3_K dot step with one sub-block a lane,
# 1/2/4 warps a row by length. Tests in two GPU streams of work while llama.cpp builds; GLM-5 q2 profile + bench;
# then vs-llama glm5,qwen3.
set -u
R=$PWD; O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $W/c $W/v; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
export LD_LIBRARY_PATH=$B DS4_BIN=$B DS4_CUDA_TEST_Q4KM=$R/.gpurun/q4km.gguf DS4_CUDA_TEST_GLM=$R/.gpurun/glm-routed.gguf
( BANDWIDTH_GBPS=1 OUT=$W/b bash bench/vs-llama.sh --ds4-bin $B --build-only > $W/build.txt 2>&1; echo "build done $(el) s" >> $W/build.txt ) &
bp=$!
( $B/ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out /dev/shm/g.gguf > $W/synth.txt 2>&1 ) &
( cd $B; timeout 230 ./cudabackend_dsv4_model_test > $W/c/dsv4.txt 2>&1; echo "dsv4 rc=$? $(el) s" >> $W/c/dsv4.txt ) &
dp=$!
( cd $B
  timeout 150 ./cudabackend_ops_test --gtest_filter='*Typed*Matmul*:*Moe*' > $W/c/ops.txt 2>&1; echo "ops rc=$? $(el) s" >> $W/c/ops.txt
  timeout 60 ./cudabackend_glm_dsa_ops_test > $W/c/glmops.txt 2>&1; echo "glmops rc=$? $(el) s" >> $W/c/glmops.txt
  timeout 120 ./cudabackend_glm_dsa_model_test > $W/c/glm.txt 2>&1; echo "glm rc=$? $(el) s" >> $W/c/glm.txt )
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|Expected|Which is" $W/c/ops.txt $W/c/glmops.txt $W/c/glm.txt | head -40
cd $B
DS4_CUDA_PROFILE=1 timeout 30 ./ds4-bench -m /dev/shm/g.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 65 --prefill-chunk 512 > $O/glm-p65.csv 2> $O/glm-p65.txt
timeout 20 ./ds4-bench -m /dev/shm/g.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 64 --prefill-chunk 512 2>&1 | grep -E "ctx  "
grep -A16 "cuda profile" $O/glm-p65.txt
rm -f /dev/shm/g.gguf; cd $R
wait $dp; grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|Expected|Which is|RealShape" $W/c/dsv4.txt | head
wait $bp; tail -1 $W/build.txt
left=$(( 560 - $(el) ))
OUT=$W/v bash bench/vs-llama.sh --ds4-bin $B --models glm5,qwen3 --deadline $left > $W/v/stdout.txt 2>&1; echo "vs-llama rc=$? $(el) s" >> $W/v/stdout.txt
grep -v "^vs-llama \[" $W/v/stdout.txt | tail -22
cp $W/v/vs-llama.md $O/ 2>/dev/null
tar cJf $O/logs.tar.xz -C $W c build.txt v/stdout.txt 2>/dev/null; echo "all done $(el) s"
