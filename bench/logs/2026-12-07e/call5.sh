#!/bin/bash
# Session 2026-12-07e, fifth call: main 03874f8's ds4-bench and ds4-gguf (.gpurun5/pk.tar.xz, with vmm_probe built
# from bench/host-read/vmm_probe.cu: which of unmap / map / set access a window remap pays for, and whether one
# access call can serve a run of remapped windows). Carry [".gpurun5"].
# 1) the attention merge folded or not (DS4_CUDA_FUSE_MERGE=0), Qwen3-30B-A3B-shaped q4_k_m decode @512, interleaved;
# 2) --ssd-streaming without --ssd-streaming-windows: auto must take the windows (3,072 of 6,144 experts on the GPU);
# 3) vmm_probe 256 windows of 2.92 MiB.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=$O/r; mkdir -p "$R"; nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun5/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
timeout 60 "$B/vmm_probe" 256 2.92 > "$R/vmm-probe.txt" 2>&1; echo "== vmm_probe rc=$? $(el) s"; grep -E "remap|set access" "$R/vmm-probe.txt"
f=/dev/shm/q30b-q4km.gguf
[ -f $f ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out $f > "$R/synth.txt" 2>&1
echo "== synth $(el) s"
D="--ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512"
dec() { local name=$1; shift; env "$@" timeout 60 "$B/ds4-bench" -m $f --backend cuda $D > /dev/null 2> "$R/d-$name.txt"
  echo "== $name rc=$? $(el) s $(grep -E 'ctx ' "$R/d-$name.txt" | head -1 | cut -c1-100)"; }
for i in 1 2; do dec merge-$i DS4_CUDA_FUSE_MERGE=1; dec nomerge-$i DS4_CUDA_FUSE_MERGE=0; done
W="--ctx-start 16 --ctx-max 80 --step-incr 32 --gen-tokens 128 --prefill-chunk 16"
timeout 100 "$B/ds4-bench" -m $f $W --ssd-streaming --ssd-streaming-cache-experts 3072 > /dev/null 2> "$R/auto.txt"
echo "== auto rc=$? $(el) s"; grep -E "ctx |experts:|expert windows|error" "$R/auto.txt" | cut -c1-220
tar czf "$O/call5.tgz" -C "$O" r && rm -rf "$R"
echo "all done $(el) s"
