#!/bin/bash
# ncu's full view (speed of light, occupancy, launch, warp stalls) of the kernels that bound an 8-sequence decode
# step: the routed-expert gate+up and down kernels (float and int8 activations), the dense 8-token matvec and
# attention, on a 4-block Qwen3-30B-A3B-shaped q4_k_m file (ds4-bench --parallel 8, decode steps only: prefill
# runs other kernels). Caches and clocks as in the run (--cache-control none --clock-control none).
#
# Here: bash bench/cuda-correctness.sh --pack build; cp bench/cuda-ncu-batch.sh .gpurun/
# There (carry [".gpurun"]): bash .gpurun/cuda-ncu-batch.sh [N]   Output: $OUT/ncu-batch-{float,int8}.txt, summary on stdout.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; B=$(mktemp -d); src=$(cd "$(dirname "$0")" && pwd)
xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
n=${1:-8}
F=/dev/shm/q4-4l.gguf
[ -f "$F" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 4 --no-tokenizer \
  --seed 1 --out "$F" > "$O/synth.log" 2>&1 || { tail -3 "$O/synth.log"; exit 1; }
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for mode in float int8; do
  flag=; [ $mode = int8 ] && flag=--int8-activations
  timeout 240 "$NCU" --clock-control none --cache-control none -k regex:"expert_|matvec_warp_kernel|matvec_q8|attention_kernel" \
    -c ${DS4_NCU_COUNT:-24} --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis "$B/ds4-bench" -m "$F" --backend cuda $flag --ctx-start 512 --ctx-max 512 \
    --step-incr 1 --gen-tokens 2 --prefill-chunk 512 --parallel "$n" > "$O/ncu-batch-$mode.txt" 2>&1
  echo "== $mode (ncu rc=$?)"
  grep -E "^  [a-zA-Z_].*\(|^    (Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Grid Size|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued Instruction|L1/TEX Hit Rate|L2 Hit Rate|Dynamic Shared Memory Per Block) " \
    "$O/ncu-batch-$mode.txt" | sed -E 's/^  ([a-zA-Z_0-9:<>, ]*)\(.*/\1/; s/ +/ /g' | head -${DS4_NCU_LINES:-400}
done
