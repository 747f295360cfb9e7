#!/bin/bash
# For the next session's first device call (written 2026-12-07e, when this session's device time ran out): where a
# replayed Qwen3 decode step's time goes, part by part, inside the graph (bench/cuda-knockout.sh), the existing
# decode knobs A/B'd the same way, the merge fold's share (not measured in call3), and the window remap's parts
# (vmm_probe, extended this session). Pack: `bash bench/cuda-correctness.sh --pack build-cuda` (glm-routed.gguf
# moved aside) and `nvcc -O3 -arch=sm_90 -o .gpurun/vmm_probe bench/host-read/vmm_probe.cu -lcuda`; carry [".gpurun"].
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p "$O/n"; nvidia-smi -L
timeout 60 .gpurun/vmm_probe 256 2.92 > "$O/n/vmm-probe.txt" 2>&1; echo "== vmm_probe rc=$? $(el) s"
grep -E "remap|set access" "$O/n/vmm-probe.txt"
OUT=$O/n timeout 400 bash bench/cuda-knockout.sh .gpurun; echo "== knockout $(el) s"
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
step() { env DS4_CUDA_STEP_TIMING=1 "$@" timeout 60 "$B/ds4-bench" -m /dev/shm/q30b-q4km.gguf --backend cuda --ctx-start 512 \
  --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512 2>&1 >/dev/null |
  sed -n 's/.*device time per replay median \([0-9.]*\) ms.*/\1/p' | tail -1; }
for knob in "" DS4_CUDA_FUSE_MERGE=0 DS4_CUDA_DENSE_SPLIT=0 DS4_CUDA_MATVEC_NR=1 DS4_CUDA_MATVEC_NR=2 DS4_CUDA_DOWN_STAGE=1 ""; do
  echo "knob '${knob:-none}': $(step ${knob:+$knob}) ms a step  ($(el) s)"
done
tar czf "$O/next.tgz" -C "$O" n && rm -rf "$O/n"
