#!/bin/bash
# Session 2026-12-04c call 4: where a replayed decode step's time goes (DS4_CUDA_STEP_TIMING: device time per
# replay vs the host's period between launches), GLM-5 q2 and Qwen3; the 2/3-bit step matvec's rows per group and
# unroll (DS4_CUDA_STEP_ROWS, DS4_CUDA_STEP_UNROLL) A/B on GLM-5; PDL off. Typed matmul tests on both shapes first.
set -u
R=$PWD; O=${OUT:-/tmp/out}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
export LD_LIBRARY_PATH=$B DS4_BIN=$B
cd $B
( ./ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out /dev/shm/g.gguf > $O/synth-g.txt 2>&1 ) &
( ./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --seed 1 --no-tokenizer --out /dev/shm/q.gguf > $O/synth-q.txt 2>&1 ) &
( timeout 100 ./cudabackend_ops_test --gtest_filter='*Typed*Matmul*' > $O/t-default.txt 2>&1; echo "default rc=$?" >> $O/t-default.txt ) &
DS4_CUDA_STEP_ROWS=4 DS4_CUDA_STEP_UNROLL=4 timeout 100 ./cudabackend_ops_test --gtest_filter='*Typed*Matmul*' > $O/t-44.txt 2>&1; echo "r4u4 rc=$?" >> $O/t-44.txt
wait
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure" $O/t-*.txt; echo "tests $(el) s"
b() { timeout 40 ./ds4-bench -m $1 --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512 2>&1 | grep -E "ctx  |step timing" | sed "s/^/$2: /"; }
export DS4_CUDA_STEP_TIMING=1
b /dev/shm/g.gguf "glm r2u2"
DS4_CUDA_STEP_ROWS=4 b /dev/shm/g.gguf "glm r4u2"
DS4_CUDA_STEP_UNROLL=4 b /dev/shm/g.gguf "glm r2u4"
DS4_CUDA_STEP_ROWS=4 DS4_CUDA_STEP_UNROLL=4 b /dev/shm/g.gguf "glm r4u4"
DS4_CUDA_PDL=0 b /dev/shm/g.gguf "glm pdl0"
b /dev/shm/q.gguf "qwen3"
DS4_CUDA_PDL=0 b /dev/shm/q.gguf "qwen3 pdl0"
echo "all done $(el) s"
