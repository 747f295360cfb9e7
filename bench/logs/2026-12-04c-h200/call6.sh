#!/bin/bash
# Session 2026-12-04c call 6: the indexer's scores a warp per key (same float order). DSv4 + GLM op tests, GLM model
# test, then the GLM-5 q2 decode with step timing and its op profile.
set -u
R=$PWD; O=${OUT:-/tmp/out}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
export LD_LIBRARY_PATH=$B DS4_BIN=$B DS4_CUDA_TEST_GLM=$R/.gpurun/glm-routed.gguf
cd $B
( ./ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out /dev/shm/g.gguf > $O/synth-g.txt 2>&1 ) &
( timeout 120 ./cudabackend_dsv4_ops_test > $O/t-dsv4ops.txt 2>&1; echo "dsv4ops rc=$?" >> $O/t-dsv4ops.txt ) &
( timeout 60 ./cudabackend_glm_dsa_ops_test > $O/t-glmops.txt 2>&1; echo "glmops rc=$?" >> $O/t-glmops.txt
  timeout 110 ./cudabackend_glm_dsa_model_test > $O/t-glm.txt 2>&1; echo "glm rc=$?" >> $O/t-glm.txt )
wait
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure" $O/t-*.txt; echo "tests $(el) s"
DS4_CUDA_STEP_TIMING=1 timeout 40 ./ds4-bench -m /dev/shm/g.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512 2>&1 | grep -E "ctx  |step timing"
DS4_CUDA_PROFILE=1 timeout 40 ./ds4-bench -m /dev/shm/g.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 65 --prefill-chunk 512 > /dev/null 2> $O/prof-g-p65.txt
grep -E "indexer|attention_latent" $O/prof-g-p65.txt
echo "all done $(el) s"
