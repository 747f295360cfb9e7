#!/bin/bash
# Session 2026-12-04c call 1: CUDA correctness of 0caa29d (tests, forced MoE paths), memcheck of the seven binaries
# in parallel, then the GLM-5 q2 decode op profile (issue 13: decode 0.14x).
set -u
R=$PWD; O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $W/g; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
export LD_LIBRARY_PATH=$B
( $B/ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out /dev/shm/g.gguf > $W/g/synth.txt 2>&1; echo "synth rc=$? $(el)" >> $W/g/synth.txt ) &
DS4_TEST_TIMEOUT=250 OUT=$O/c timeout 420 bash bench/cuda-correctness.sh .gpurun tests > $O/tests-summary.txt 2>&1
echo "tests done $(el) s" >> $O/tests-summary.txt
grep -E "FAILED|rc=[^0]|Failure|f16 prefill|done" $O/tests-summary.txt | head -40; grep -c "PASSED" $O/tests-summary.txt
cd $B
mc() { timeout $1 compute-sanitizer --tool memcheck --error-exitcode 9 ./$2 --gtest_filter="$3" > $O/memcheck-$2.txt 2>&1; echo "memcheck $2 rc=$?" >> $O/memcheck-$2.txt; }
left=$(( 540 - $(el) )); [ $left -gt 150 ] && left=150
if [ $left -gt 40 ]; then
  mc $left cudabackend_f16_prefill_test '*' & mc $left cudabackend_ops_test '*Matmul*:*Moe*' &
  mc $left cudabackend_glm_dsa_model_test '-*RealShape*' &
  wait; grep -hE "ERROR SUMMARY|rc=|^\[  (PASSED|FAILED) " $O/memcheck-*.txt
fi
cat $W/g/synth.txt | tail -2
if [ -f /dev/shm/g.gguf ] && [ $(el) -lt 540 ]; then
  DS4_CUDA_PROFILE=1 timeout 25 ./ds4-bench -m /dev/shm/g.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 1 --prefill-chunk 512 > $O/glm-p1.csv 2> $O/glm-p1.txt
  DS4_CUDA_PROFILE=1 timeout 30 ./ds4-bench -m /dev/shm/g.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 65 --prefill-chunk 512 > $O/glm-p65.csv 2> $O/glm-p65.txt
  timeout 20 ./ds4-bench -m /dev/shm/g.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 64 --prefill-chunk 512 > $O/glm-plain.csv 2>&1
  cat $O/glm-plain.csv; grep -A40 "cuda profile" $O/glm-p65.txt | head -45
fi
echo "all done $(el) s"
