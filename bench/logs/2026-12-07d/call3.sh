#!/bin/bash
# Session 2026-12-07d, third call: main with the expert windows' replay fix (a replayed decode step never called
# the source, so only prefill and the recording step were counted and nothing was promoted after the first token:
# call1's 4.1 % on the device, 38 t/s). Packed with `bash bench/cuda-correctness.sh --pack build-cuda` (glm-routed.gguf
# moved aside) and `bash bench/device-pack.sh` (.gpu/llama-src.tar.xz); carry [".gpurun", ".gpu"].
# In order: llama.cpp's CUDA llama-bench built in the background (vs-llama.sh's options) while the windows' CUDA test
# (op by op and replayed, counts equal) runs and the Qwen3-30B-A3B-shaped q4_k_m file is written; then on the same
# file, one after another: ds4 resident, ds4 expert windows (3,072 of 6,144 experts on the GPU), ds4's expert cache
# (the same budget), llama.cpp with every routed expert in host memory (-ot exps=CPU) and resident.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=$O/r; mkdir -p "$R"
nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; nproc; free -g | head -2
L=/tmp/llama-cuda; mkdir -p $L/src
( tar -C $L/src -xJf .gpu/llama-src.tar.xz &&
  cmake -S $L/src -B $L/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=ON -DGGML_CUDA_NCCL=OFF -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF > $L/cmake.log 2>&1 && ninja -C $L/build llama-bench > $L/ninja.log 2>&1 ) &
LB=$!
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
DS4_BIN=$B DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf timeout 150 "$B/cudabackend_model_test" --gtest_filter='*ExpertWindows*' \
  > "$R/windows-test.txt" 2>&1
echo "== windows test rc=$? $(el) s"; grep -E "expert windows|OK \]|PASSED|FAILED|Failure|Expected|rror" "$R/windows-test.txt" | head -60
f=/dev/shm/q30b-q4km.gguf
[ -f $f ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out $f | tail -1
echo "== synth $(el) s"
timeout 60 .gpurun/vmm_probe 256 2.92 > "$R/vmm-probe.txt" 2>&1; echo "== vmm_probe rc=$? $(el) s"; tail -12 "$R/vmm-probe.txt"
wait $LB; echo "== llama.cpp build rc=$? $(el) s"; tail -2 $L/ninja.log
W="--ctx-start 16 --ctx-max 80 --step-incr 32 --gen-tokens 128 --prefill-chunk 16"
run() { local name=$1; shift; timeout 120 "$B/ds4-bench" -m $f $W "$@" --json "$R/q-$name.json" > /dev/null 2> "$R/q-$name.txt"
  echo "== $name rc=$? $(el) s"; grep -E "ctx |experts:|expert windows|ssd-streaming:|error" "$R/q-$name.txt" | cut -c1-300; }
run resident
run windows --ssd-streaming --ssd-streaming-cache-experts 3072 --ssd-streaming-windows on
run cache --ssd-streaming --ssd-streaming-cache-experts 3072 --ssd-streaming-windows off
if [ -x $L/build/bin/llama-bench ]; then
  for ot in exps=CPU none; do
    a=(-ot "$ot"); [ "$ot" = none ] && a=()
    timeout 150 $L/build/bin/llama-bench -m $f -ngl 99 -fa 1 "${a[@]}" -p 16 -n 128 -d 0,48 -r 2 -o json \
      > "$R/llama-$ot.json" 2> "$R/llama-$ot.log"
    echo "== llama.cpp -ot $ot rc=$? $(el) s"
    python3 -c "import json,sys; [print(r['n_prompt'], r['n_gen'], r['n_depth'], round(r['avg_ts'],2)) for r in json.load(open(sys.argv[1]))]" "$R/llama-$ot.json"
  done
fi
tar czf "$O/call3.tgz" -C "$O" r && rm -rf "$R"
echo "all done $(el) s"
