#!/bin/bash
# Session 2026-12-07d, fourth call: how many window swaps a step pays (call3: 4 a step, each two remaps of ~0.2 ms
# plus a 4 MiB copy, ~2 ms of a 13.9 ms token). .gpurun4/pk.tar.xz holds ds4-bench and ds4-gguf of main with
# DS4_WINDOW_SWAPS (stripped, with the Debian libraries they need); carry [".gpurun4"] (and ".gpu" with LLAMA=1:
# llama.cpp's llama-bench built again for a same-machine baseline). The Qwen3-30B-A3B-shaped q4_k_m file, 3,072
# of 6,144 experts on the GPU: the expert cache, then windows with swaps N:RATIO:MARGIN = 4:1.5:1 (the default),
# 1:1.5:1, 1:2:4 and 0 (fill only), then resident. QUICK=1: the windows only; SWAPS='...': those variants.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=$O/r; mkdir -p "$R"
nvidia-smi -L
L=/tmp/llama-cuda
if [ "${LLAMA:-0}" = 1 ]; then
  mkdir -p $L/src
  ( tar -C $L/src -xJf .gpu/llama-src.tar.xz &&
    cmake -S $L/src -B $L/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
      -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=ON -DGGML_CUDA_NCCL=OFF -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DLLAMA_BUILD_APP=OFF > $L/cmake.log 2>&1 && ninja -C $L/build llama-bench > $L/ninja.log 2>&1 ) &
  LB=$!
fi
B=$(mktemp -d); xz -dc .gpurun4/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
f=/dev/shm/q30b-q4km.gguf
[ -f $f ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out $f | tail -1
echo "== synth $(el) s"
if [ "${LLAMA:-0}" = 1 ]; then wait $LB; echo "== llama.cpp build rc=$? $(el) s"; fi
W="--ctx-start 16 --ctx-max 80 --step-incr 32 --gen-tokens 128 --prefill-chunk 16"
S="--ssd-streaming --ssd-streaming-cache-experts 3072"
run() { local name=$1; shift; timeout 100 "$B/ds4-bench" -m $f $W "$@" --json "$R/q-$name.json" > /dev/null 2> "$R/q-$name.txt"
  echo "== $name rc=$? $(el) s"; grep -E "ctx |expert windows|window swaps|error" "$R/q-$name.txt" | cut -c1-200; }
[ "${QUICK:-0}" = 1 ] || run cache $S --ssd-streaming-windows off
for sw in ${SWAPS:-4:1.5:1 1:1.5:1 1:2:4 0}; do DS4_WINDOW_SWAPS=$sw run "windows-$sw" $S --ssd-streaming-windows on; done
[ "${QUICK:-0}" = 1 ] || run resident
if [ -x $L/build/bin/llama-bench ]; then
  timeout 100 $L/build/bin/llama-bench -m $f -ngl 99 -fa 1 -ot exps=CPU -p 16 -n 128 -d 0,48 -r 2 -o json \
    > "$R/llama-exps-cpu.json" 2> "$R/llama-exps-cpu.log"
  echo "== llama.cpp -ot exps=CPU rc=$? $(el) s"
  python3 -c "import json,sys; [print(r['n_prompt'], r['n_gen'], r['n_depth'], round(r['avg_ts'],2)) for r in json.load(open(sys.argv[1]))]" "$R/llama-exps-cpu.json"
fi
tar czf "$O/call4.tgz" -C "$O" r && rm -rf "$R"
echo "all done $(el) s"
