#!/bin/bash
# Written in session 2026-12-07f for the next session's second call: the knockout table (bench/cuda-knockout.sh: what each part of a replayed Qwen3
# decode step costs inside the graph) with the settings next-call1 chose (AHEAD=level of the L2 branch), and vmm_probe's
# remap parts (issue 11). Same pack as next-call1 (plus .gpurun/vmm_probe: nvcc -O3 -arch=sm_90 -lcuda); carry [".gpurun"].
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p "$O/n"; nvidia-smi -L
timeout 60 .gpurun/vmm_probe 256 2.92 > "$O/n/vmm-probe.txt" 2>&1; echo "== vmm_probe rc=$? $(el) s"
grep -E "remap|set access" "$O/n/vmm-probe.txt"
export DS4_CUDA_L2_AHEAD=${AHEAD:-0}
OUT=$O/n timeout 480 bash bench/cuda-knockout.sh .gpurun; echo "== knockout (L2_AHEAD=$DS4_CUDA_L2_AHEAD) $(el) s"
tar czf "$O/call2.tgz" -C "$O" n && rm -rf "$O/n"
