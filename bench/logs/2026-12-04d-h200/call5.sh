#!/bin/bash
# Session 2026-12-04d call 5: four rows a block in the one-token Q4_K/Q6_K matvec (A/B: DS4_CUDA_MATVEC_NR=1),
# routing without shared memory (route_warp_kernel), on top of call 4's changes: the CUDA op suites, both families'
# model suites, the DSv4 batched test at call 4's failing seed on this build and on 91b25da's (before call 4's
# changes), decode/prefill bench.
set -u
R=$PWD; O=${OUT:-/tmp/out}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
xz -dc .gpurun/old-dsv4-test.xz > $B/old_dsv4_model_test; chmod +x $B/old_dsv4_model_test
export LD_LIBRARY_PATH=$B DS4_BIN=$B DS4_CUDA_TEST_GLM=$R/.gpurun/glm-routed.gguf DS4_CUDA_TEST_Q4KM=$R/.gpurun/q4km.gguf
cd $B
( ./ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out /dev/shm/g.gguf > $O/synth-g.txt 2>&1 ) &
( ./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --seed 1 --no-tokenizer --out /dev/shm/q.gguf > $O/synth-q.txt 2>&1 ) &
( ./ds4-gguf synth --arch deepseek4 --preset flash --quant q2 --n-layer 8 --seed 1 --no-tokenizer --out /dev/shm/f.gguf > $O/synth-f.txt 2>&1 ) &
S=12829905755645760577; F='*BatchedSequencesMatchCpuAlone*'
( DS4_TEST_SEED=$S timeout 60 ./cudabackend_dsv4_model_test --gtest_filter="$F" > $O/t-seed-new.txt 2>&1; echo "seed-new rc=$?" >> $O/t-seed-new.txt
  DS4_TEST_SEED=$S timeout 60 ./old_dsv4_model_test --gtest_filter="$F" > $O/t-seed-old.txt 2>&1; echo "seed-old rc=$?" >> $O/t-seed-old.txt
  for i in 1 2 3; do timeout 60 ./cudabackend_dsv4_model_test --gtest_filter="$F" > $O/t-rand$i.txt 2>&1; echo "rand$i rc=$?" >> $O/t-rand$i.txt; done ) &
( timeout 100 ./cudabackend_dsv4_ops_test > $O/t-dsv4ops.txt 2>&1; echo "dsv4ops rc=$?" >> $O/t-dsv4ops.txt
  timeout 100 ./cudabackend_dsv4_model_test --gtest_filter='-*RealShape*:*Batched*' > $O/t-dsv4.txt 2>&1; echo "dsv4 rc=$?" >> $O/t-dsv4.txt ) &
( timeout 150 ./cudabackend_ops_test > $O/t-ops.txt 2>&1; echo "ops rc=$?" >> $O/t-ops.txt ) &
( timeout 150 ./cudabackend_model_test > $O/t-model.txt 2>&1; echo "model rc=$?" >> $O/t-model.txt ) &
( timeout 60 ./cudabackend_glm_dsa_ops_test > $O/t-glmops.txt 2>&1; echo "glmops rc=$?" >> $O/t-glmops.txt
  timeout 90 ./cudabackend_glm_dsa_model_test > $O/t-glm.txt 2>&1; echo "glm rc=$?" >> $O/t-glm.txt )
wait
grep -HE "^\[  (PASSED|FAILED) |rc=|Failure|Expected|actual" $O/t-*.txt | sed "s|$O/||"; echo "tests $(el) s"
b() { timeout 40 ./ds4-bench -m $1 --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512 2>&1 | grep -E "ctx  |step timing" | sed "s/^/$2: /"; }
export DS4_CUDA_STEP_TIMING=1
b /dev/shm/g.gguf "glm"
DS4_CUDA_MATVEC_NR=1 b /dev/shm/g.gguf "glm NR=1"
b /dev/shm/q.gguf "qwen3"
DS4_CUDA_MATVEC_NR=1 b /dev/shm/q.gguf "qwen3 NR=1"
b /dev/shm/f.gguf "flash8"
b /dev/shm/g.gguf "glm"
b /dev/shm/q.gguf "qwen3"
tar cf $O/tests.tar -C $O $(cd $O; ls t-*.txt synth-*.txt) && rm -f $O/t-*.txt $O/synth-*.txt
echo "all done $(el) s"
