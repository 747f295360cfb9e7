#!/bin/bash
# Session 2026-12-04d call 6: (1) the DSv4 batched test's failing seed (call 4) with a diagnostic test (a temporary
# build of cudabackend_dsv4_model_test: GPU alone and GPU batched against CPU alone, row by row); (2) while
# llama.cpp builds, ncu of a Qwen3 decode step; (3) vs llama.cpp, GLM-5 q2 and Qwen3 q4_k_m, same files, same run.
set -u
R=$PWD; O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $W/v $O/llb; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
xz -dc .gpurun/repro-test.xz > $B/repro_test; chmod +x $B/repro_test
export LD_LIBRARY_PATH=$B DS4_BIN=$B
( BANDWIDTH_GBPS=1 OUT=$O/llb bash bench/vs-llama.sh --ds4-bin $B --build-only > $W/build.txt 2>&1; echo "build done $(el) s" >> $W/build.txt ) &
bp=$!
cd $B
DS4_TEST_SEED=12829905755645760577 timeout 90 ./repro_test --gtest_filter='TmpRepro*' 2>&1 | grep -E "seq|OK|FAIL" > $O/repro.txt
cat $O/repro.txt; echo "repro $(el) s"
./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --seed 1 --no-tokenizer --out /dev/shm/q.gguf > /dev/null 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 120 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size \
  --csv --page raw ./ds4-bench -m /dev/shm/q.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 \
  --gen-tokens 3 --prefill-chunk 512 > $O/ncu-q.csv 2> $O/ncu-q.log
echo "ncu rc=$? $(el) s"; xz -T4 $O/ncu-q.csv; rm -f /dev/shm/q.gguf
cd $R
wait $bp; tail -1 $W/build.txt
left=$(( 540 - $(el) ))
OUT=$W/v bash bench/vs-llama.sh --ds4-bin $B --models glm5,qwen3 --deadline $left > $W/v/stdout.txt 2>&1; echo "vs-llama rc=$? $(el) s" >> $W/v/stdout.txt
grep -v "^vs-llama \[" $W/v/stdout.txt | tail -22
cp $W/v/vs-llama.md $O/ 2>/dev/null
tar cJf $O/logs.tar.xz -C $W build.txt v/stdout.txt 2>/dev/null; echo "all done $(el) s"
