#!/bin/bash
# Session 2026-12-04b call 2: f16 tensor-core prefill (mma_gemm.cu). CUDA tests (the new f16 suite, the model and op
# suites) while llama-bench builds; then bench/vs-llama.sh --models glm5,qwen3 (ds4 default = f16 prefill) keeping the
# files; then on the Qwen3 file: ds4-bench --exact vs default, and an op profile of the f16 prefill.
set -u
R=$PWD; O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $W/c $W/v $W/ab; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
( BANDWIDTH_GBPS=1 OUT=$W/b bash bench/vs-llama.sh --build-only > $W/build.txt 2>&1; echo "build done $(el) s" >> $W/build.txt ) &
bp=$!
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
export LD_LIBRARY_PATH=$B DS4_BIN=$B DS4_CUDA_TEST_Q4KM=$R/.gpurun/q4km.gguf
( cd $B
  timeout 150 ./cudabackend_f16_prefill_test > $W/c/f16.txt 2>&1; echo "f16 rc=$? $(el) s" >> $W/c/f16.txt
  timeout 200 ./cudabackend_model_test > $W/c/model.txt 2>&1; echo "model rc=$? $(el) s" >> $W/c/model.txt
  timeout 100 ./cudabackend_ops_test > $W/c/ops.txt 2>&1; echo "ops rc=$? $(el) s" >> $W/c/ops.txt )
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|f16 prefill|error|Expected|Which is|row " $W/c/*.txt | head -60
wait $bp; tail -2 $W/build.txt
left=$(( 470 - $(el) ))
OUT=$W/v bash bench/vs-llama.sh --models glm5,qwen3 --keep --deadline $left > $W/v/stdout.txt 2>&1; echo "vs-llama rc=$? $(el) s" >> $W/v/stdout.txt
grep -v "^vs-llama \[" $W/v/stdout.txt | tail -30
Q=$(ls /dev/shm/vsl-qwen3-*.gguf /tmp/vsl-qwen3-*.gguf 2>/dev/null | head -1)
if [ -n "$Q" ] && [ $(el) -lt 520 ]; then
  for mode in exact f16; do
    flag=; [ $mode = exact ] && flag=--exact
    timeout 40 $B/ds4-bench -m "$Q" --backend cuda $flag --ctx-start 512 --ctx-max 4096 --step-mul 8 --gen-tokens 16 \
      --prefill-chunk 512 > $W/ab/$mode.csv 2> $W/ab/$mode.log; echo "$mode rc=$?"; cat $W/ab/$mode.csv
  done
  [ $(el) -lt 550 ] && DS4_CUDA_PROFILE=1 timeout 30 $B/ds4-bench -m "$Q" --backend cuda --ctx-start 512 --ctx-max 512 \
      --step-incr 1 --gen-tokens 2 --prefill-chunk 512 > $W/ab/profile.csv 2> $W/ab/profile.txt
  grep -iE "gemm|moe prefill|attention|total" $W/ab/profile.txt | head -20
fi
rm -f /dev/shm/vsl-*.gguf /tmp/vsl-*.gguf
cp $W/v/vs-llama.md $O/ 2>/dev/null; cp $W/v/vs-llama-raw.tar.xz $O/ 2>/dev/null
tar cJf $O/logs.tar.xz -C $W c ab build.txt v/stdout.txt 2>/dev/null; echo "all done $(el) s"
