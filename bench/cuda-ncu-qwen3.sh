#!/bin/bash
# ncu over the decode kernels of a 4-block Qwen3-30B-A3B-shaped q4_k_m file, int8 and float activations, plus the
# int8 model test. Here: bash bench/cuda-correctness.sh --pack build, then copy this script into .gpurun/.
# There (carry [".gpurun"]): bash .gpurun/cuda-ncu-qwen3.sh   Output: $OUT/ncu-{int8,exact}.txt, model.txt.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; B=$(mktemp -d); src=$(cd "$(dirname "$0")" && pwd)
xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B; cd "$B"
F=/dev/shm/q4.gguf
./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 4 --no-tokenizer --seed 1 --out "$F" > /dev/null 2>&1 || exit 1
( export DS4_BIN=$B; timeout 120 ./cudabackend_model_test --gtest_filter="*Int8*" > "$O/model.txt" 2>&1 )
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for mode in int8 exact; do
  flag=--int8-activations; [ $mode = exact ] && flag=
  timeout 200 $NCU --clock-control none -k regex:"q8|matvec|expert|rms_norm|rope|route|add_kernel|kv_store|attention" -s 400 -c 40 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    ./ds4-bench -m "$F" --backend cuda $flag --ctx-start 64 --ctx-max 64 --step-incr 1 --gen-tokens 12 --prefill-chunk 64 > "$O/ncu-$mode.txt" 2>&1
  echo "ncu rc=$?" >> "$O/ncu-$mode.txt"
done
for mode in int8 exact; do
  echo "== $mode"
  awk '/^  [a-z_]+.*\(/{name=$1} /Duration/{d=$NF" "$(NF-1)} /DRAM Throughput/{dr=$NF} /Achieved Occupancy/{oc=$NF} /Registers Per Thread/{print name, d, "dram%", dr, "occ", oc}' "$O/ncu-$mode.txt" | sed 's/(.*//' | sort | uniq -c | head -40
done
