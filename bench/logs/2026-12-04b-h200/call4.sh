#!/bin/bash
# Session 2026-12-04b call 4 (short: the session's last device minutes): mma_gemm.cu chunk decoders for Q4_K, Q6_K,
# Q8_0, Q2_K, IQ2_XXS. The f16 suite, the matmul/MoE op tests and the f16 model test; then prefill --exact vs f16
# on the Qwen3 shape q4_k_m (8 blocks... whole 48: synth 24 s) with an op profile; GLM-5 q2 if time is left.
set -u
R=$PWD; O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $W; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
export LD_LIBRARY_PATH=$B DS4_BIN=$B DS4_CUDA_TEST_Q4KM=$R/.gpurun/q4km.gguf
cd $B
./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --seed 1 --no-tokenizer --out /dev/shm/q.gguf > $W/synth.txt 2>&1 &
sp=$!
timeout 30 ./cudabackend_f16_prefill_test > $W/f16.txt 2>&1; echo "f16 rc=$? $(el) s" >> $W/f16.txt
timeout 40 ./cudabackend_ops_test --gtest_filter='*Matmul*:*Moe*' > $W/ops.txt 2>&1; echo "ops rc=$? $(el) s" >> $W/ops.txt
timeout 40 ./cudabackend_model_test --gtest_filter='*F16*' > $W/model.txt 2>&1; echo "model rc=$? $(el) s" >> $W/model.txt
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|f16 prefill|relative error [0-9.e-]+ >" $W/f16.txt $W/ops.txt $W/model.txt | head -30
wait $sp; echo "synth $(el) s"
for mode in exact f16; do
  flag=; [ $mode = exact ] && flag=--exact
  timeout 30 ./ds4-bench -m /dev/shm/q.gguf --backend cuda $flag --ctx-start 512 --ctx-max 512 --step-incr 1 \
    --gen-tokens 4 --prefill-chunk 512 > $W/$mode.csv 2> $W/$mode.log; echo "$mode rc=$? $(el) s"; tail -1 $W/$mode.csv
done
DS4_CUDA_PROFILE=1 timeout 25 ./ds4-bench -m /dev/shm/q.gguf --backend cuda --ctx-start 512 --ctx-max 512 \
  --step-incr 1 --gen-tokens 2 --prefill-chunk 512 > $W/profile.csv 2> $W/profile.txt
grep -iE "moe prefill|gemm|attention" $W/profile.txt | head -8
rm -f /dev/shm/q.gguf
if [ $(el) -lt 120 ]; then
  ./ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --seed 1 --no-tokenizer --out /dev/shm/g.gguf > $W/synth-g.txt 2>&1
  timeout 25 ./ds4-bench -m /dev/shm/g.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 4 \
    --prefill-chunk 512 > $W/glm.csv 2> $W/glm.log; echo "glm rc=$? $(el) s"; tail -1 $W/glm.csv
fi
rm -f /dev/shm/*.gguf
tar cJf $O/logs.tar.xz -C $W . ; echo "all done $(el) s"
