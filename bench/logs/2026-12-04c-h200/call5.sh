#!/bin/bash
# Session 2026-12-04c call 5: unroll 4 the default of the 2/3-bit step matvec; op profiles with the indexer, plans
# and elementwise ops timed (the decode step's device time was ~2 ms above the op profile's sum); benches.
set -u
R=$PWD; O=${OUT:-/tmp/out}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
export LD_LIBRARY_PATH=$B DS4_BIN=$B
cd $B
( ./ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out /dev/shm/g.gguf > $O/synth-g.txt 2>&1 ) &
( ./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --seed 1 --no-tokenizer --out /dev/shm/q.gguf > $O/synth-q.txt 2>&1 ) &
timeout 100 ./cudabackend_ops_test --gtest_filter='*Typed*Matmul*:*Moe*' > $O/t-ops.txt 2>&1; echo "ops rc=$?" >> $O/t-ops.txt
wait
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure" $O/t-*.txt; echo "tests $(el) s"
b() { timeout 40 ./ds4-bench -m $1 --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512 2>&1 | grep -E "ctx  |step timing" | sed "s/^/$2: /"; }
export DS4_CUDA_STEP_TIMING=1
b /dev/shm/g.gguf "glm"
b /dev/shm/q.gguf "qwen3"
unset DS4_CUDA_STEP_TIMING
for m in g q; do
  DS4_CUDA_PROFILE=1 timeout 40 ./ds4-bench -m /dev/shm/$m.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 1 --prefill-chunk 512 > /dev/null 2> $O/prof-$m-p1.txt
  DS4_CUDA_PROFILE=1 timeout 40 ./ds4-bench -m /dev/shm/$m.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 65 --prefill-chunk 512 > /dev/null 2> $O/prof-$m-p65.txt
  echo "== $m"; grep -A24 "cuda profile" $O/prof-$m-p65.txt
done
echo "all done $(el) s"
