#!/bin/bash
# Session 2026-12-04b call 1: CUDA correctness of HEAD (six test binaries + forced MoE paths) while llama-bench builds,
# then bench/vs-llama.sh --models glm5 (issue 14's last table).
set -u
R=$PWD; O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $W/c $W/v; T0=$(date +%s)
( BANDWIDTH_GBPS=1 OUT=$W/b bash bench/vs-llama.sh --build-only > $W/build.txt 2>&1; echo "build done $(( $(date +%s) - T0 )) s" >> $W/build.txt ) &
bp=$!
OUT=$W/c bash bench/cuda-correctness.sh .gpurun tests > $W/c/summary.txt 2>&1
echo "correctness done $(( $(date +%s) - T0 )) s" >> $W/c/summary.txt
cat $W/c/summary.txt
wait $bp; tail -3 $W/build.txt
left=$(( 575 - ($(date +%s) - T0) ))
OUT=$W/v bash bench/vs-llama.sh --models glm5 --deadline $left > $W/v/stdout.txt 2>&1; echo "vs-llama rc=$? $(( $(date +%s) - T0 )) s" >> $W/v/stdout.txt
cat $W/v/stdout.txt | tail -40
cp $W/c/summary.txt $O/correctness.txt; cp $W/v/stdout.txt $O/vs-llama-glm5.txt; cp $W/v/vs-llama.md $O/ 2>/dev/null
cp $W/v/vs-llama-raw.tar.xz $O/ 2>/dev/null; tar cJf $O/logs.tar.xz -C $W c build.txt 2>/dev/null
