#!/bin/bash
# ncu over the fused MoE decode kernels (DeepSeek V4 Flash q2, 8 blocks): issue, memory, stall sections.
# Copy this script beside the pack (pk.tar.xz from bench/cuda-correctness.sh --pack, in a carried folder) and run it
# there: bash FOLDER/cuda-ncu-moe.sh. Output: $OUT/ncu.txt and a short digest on stdout.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; B=$(mktemp -d); src=$(cd "$(dirname "$0")" && pwd)
xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B; cd "$B"
F=/dev/shm/dsv4-f8.gguf
./ds4-gguf synth --arch deepseek4 --preset flash --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out "$F" > /dev/null 2>&1 || exit 1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 300 $NCU --clock-control none -k regex:"expert_(gate_up|down_combine)" -c 4 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section Occupancy --section LaunchStats --section SchedulerStats \
  ./ds4-bench -m "$F" --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 4 --prefill-chunk 512 > "$O/ncu.txt" 2>&1
echo "ncu rc=$?" >> "$O/ncu.txt"
grep -E "expert_|matvec_warp|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|Issued Ipc|No Eligible|Achieved Occupancy|Registers Per|Stall|L1/TEX Hit|Warp Cycles Per Issued" "$O/ncu.txt" | head -150
