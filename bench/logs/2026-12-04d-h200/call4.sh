#!/bin/bash
# Session 2026-12-04d call 4: short rows a few to a warp in the chunk matvec (GLM's Q4_0 wk_b), norms with
# ~4 values a thread loaded before stored, RoPE a thread a pair, attention merge a thread a value: the CUDA op
# suites, both families' model suites, decode/prefill bench, ncu of a GLM and a Qwen3 decode step.
set -u
R=$PWD; O=${OUT:-/tmp/out}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
export LD_LIBRARY_PATH=$B DS4_BIN=$B DS4_CUDA_TEST_GLM=$R/.gpurun/glm-routed.gguf DS4_CUDA_TEST_Q4KM=$R/.gpurun/q4km.gguf
cd $B
( ./ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out /dev/shm/g.gguf > $O/synth-g.txt 2>&1 ) &
( ./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --seed 1 --no-tokenizer --out /dev/shm/q.gguf > $O/synth-q.txt 2>&1 ) &
( ./ds4-gguf synth --arch deepseek4 --preset flash --quant q2 --n-layer 8 --seed 1 --no-tokenizer --out /dev/shm/f.gguf > $O/synth-f.txt 2>&1 ) &
( timeout 100 ./cudabackend_dsv4_ops_test > $O/t-dsv4ops.txt 2>&1; echo "dsv4ops rc=$?" >> $O/t-dsv4ops.txt
  timeout 100 ./cudabackend_dsv4_model_test --gtest_filter='-*RealShape*' > $O/t-dsv4.txt 2>&1; echo "dsv4 rc=$?" >> $O/t-dsv4.txt ) &
( timeout 150 ./cudabackend_ops_test > $O/t-ops.txt 2>&1; echo "ops rc=$?" >> $O/t-ops.txt ) &
( timeout 150 ./cudabackend_model_test > $O/t-model.txt 2>&1; echo "model rc=$?" >> $O/t-model.txt ) &
( timeout 60 ./cudabackend_glm_dsa_ops_test > $O/t-glmops.txt 2>&1; echo "glmops rc=$?" >> $O/t-glmops.txt
  timeout 90 ./cudabackend_glm_dsa_model_test > $O/t-glm.txt 2>&1; echo "glm rc=$?" >> $O/t-glm.txt )
wait
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure" $O/t-*.txt; echo "tests $(el) s"
b() { timeout 40 ./ds4-bench -m $1 --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512 2>&1 | grep -E "ctx  |step timing" | sed "s/^/$2: /"; }
export DS4_CUDA_STEP_TIMING=1
b /dev/shm/g.gguf "glm"
b /dev/shm/q.gguf "qwen3"
b /dev/shm/f.gguf "flash8"
unset DS4_CUDA_STEP_TIMING
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for m in g q; do
  timeout 150 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size \
    --csv --page raw ./ds4-bench -m /dev/shm/$m.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 \
    --gen-tokens 3 --prefill-chunk 512 > $O/ncu-$m.csv 2> $O/ncu-$m.log
  echo "ncu $m rc=$? $(el) s"
done
xz -T4 $O/ncu-*.csv; tar cf $O/tests.tar -C $O $(cd $O; ls t-*.txt synth-*.txt) && rm -f $O/t-*.txt $O/synth-*.txt
echo "all done $(el) s"
