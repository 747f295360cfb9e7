#!/bin/bash
# Where one decode step's time goes, kernel by kernel, inside the replayed CUDA graph: ncu's duration of every
# kernel of the last decode step (caches and clocks left alone, so each reads as it does in the step) of
# ds4-bench --parallel N on a 4-block Qwen3-30B-A3B-shaped q4_k_m file, for each N given, float and int8
# activations. The event profile (cuda-parallel-profile.sh) runs ops one by one and counts launch gaps; this
# does not, so the per-layer sum here against the measured step time says what the gaps cost.
#
# Here: bash bench/cuda-correctness.sh --pack build; cp bench/cuda-ncu-step.sh bench/ncu_step_table.py .gpurun/
# There (carry [".gpurun"]): bash .gpurun/cuda-ncu-step.sh [N...]   (default 1 8); DS4_NCU_MODES="float" (default "float int8")
# Output under $OUT: ncu-MODE-N.csv (raw) and the per-kernel table of the last step on stdout; with
# DS4_NCU_DETAIL_N, ncu-detail-N.txt (see the end).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; B=$(mktemp -d); src=$(cd "$(dirname "$0")" && pwd)
xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
ns=${*:-1 8}
F=/dev/shm/q4-4l.gguf
[ -f "$F" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 4 --no-tokenizer \
  --seed 1 --out "$F" > "$O/synth.log" 2>&1 || { tail -3 "$O/synth.log"; exit 1; }
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for mode in ${DS4_NCU_MODES-float int8}; do  # DS4_NCU_MODES= (empty): the detail run alone
  flag=; [ $mode = int8 ] && flag=--int8-activations
  for n in $ns; do
    timeout 150 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size \
      --csv --page raw "$B/ds4-bench" -m "$F" --backend cuda $flag --ctx-start 512 --ctx-max 512 --step-incr 1 \
      --gen-tokens 4 --prefill-chunk 512 --parallel "$n" > "$O/ncu-$mode-$n.csv" 2> "$O/ncu-$mode-$n.log"
    echo "== $mode N=$n (ncu rc=$?)"
    python3 "$src/ncu_step_table.py" "$O/ncu-$mode-$n.csv"
  done
done
# DS4_NCU_DETAIL_N=N: then ncu's sections (throughput against the roofline, memory, occupancy, warp stalls,
# scheduler) for the launches of ds4-bench --parallel N whose kernel matches DS4_NCU_DETAIL_KERNELS (default
# the decode products: the dense split and 8-token tiles, the routed experts' split and down kernels; not the
# plain matvec names, which the prefill's small F32 router products would fill the launch count with), the
# last decode steps' launches last in ncu-detail-N.txt.
if [ -n "${DS4_NCU_DETAIL_N:-}" ]; then
  n=$DS4_NCU_DETAIL_N
  timeout 240 "$NCU" --clock-control none --cache-control none -k "regex:${DS4_NCU_DETAIL_KERNELS:-split_mma|matvec_warp_bounded|expert_gate_up|down_combine}" \
    --launch-count "${DS4_NCU_DETAIL_COUNT:-60}" --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    "$B/ds4-bench" -m "$F" --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 4 \
    --prefill-chunk 512 --parallel "$n" > "$O/ncu-detail-$n.txt" 2> "$O/ncu-detail-$n.log"
  echo "== detail N=$n (ncu rc=$?): $O/ncu-detail-$n.txt"
fi
