#!/bin/bash
# Session 2026-12-07d, first device call: main's working tree with issue 11's expert windows (not yet committed
# when packed; the pack's `commit` file lists the tree). Packed here with `bash bench/cuda-correctness.sh --pack
# build-cuda` plus the two probes built into .gpurun (nvcc lines in bench/host-read/*.cu). Carry [".gpurun"].
# In order: whether windows of the GPU's address space backed by page-locked host memory work on this driver and
# what a kernel reads through them (vmm_probe), the mapped-host read rate (host_read); the windows' CUDA test
# (bit-exact against resident at budgets 1 / half / all / churn); issue 11's experts-in-RAM benchmark on a
# Qwen3-30B-A3B-shaped q4_k_m file (3,072 of 6,144 experts on the GPU): expert windows, resident, the expert cache;
# then the three CUDA model suites.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
timeout 60 .gpurun/vmm_probe 256 2.92 > "$O/vmm-probe.txt" 2>&1; echo "== vmm_probe rc=$? $(el) s"; cat "$O/vmm-probe.txt"
timeout 40 .gpurun/host_read 2048 > "$O/host-read.txt" 2>&1; echo "== host_read rc=$? $(el) s"; cat "$O/host-read.txt"
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
DS4_BIN=$B DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf timeout 120 "$B/cudabackend_model_test" --gtest_filter='*ExpertWindows*' \
  > "$O/windows-test.txt" 2>&1
echo "== windows test rc=$? $(el) s"; grep -E "expert windows|OK \]|PASSED|FAILED|Failure|rror" "$O/windows-test.txt" | head -30
f=/dev/shm/q30b-q4km.gguf  # bench/parallel-decode.sh's file
[ -f $f ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out $f | tail -1
echo "== synth $(el) s"; free -g | head -2
W="--ctx-start 16 --ctx-max 80 --step-incr 32 --gen-tokens 64 --prefill-chunk 16"
run() { local name=$1; shift; timeout 120 "$B/ds4-bench" -m $f $W "$@" --json "$O/q-$name.json" > /dev/null 2> "$O/q-$name.txt"
  echo "== $name rc=$? $(el) s"; grep -E "ctx |experts:|expert windows|ssd-streaming:|error" "$O/q-$name.txt" | cut -c1-400; }
run windows --ssd-streaming --ssd-streaming-cache-experts 3072 --ssd-streaming-windows on
run resident
run cache --ssd-streaming --ssd-streaming-cache-experts 3072 --ssd-streaming-windows off
mkdir -p "$O/tests"
OUT=$O/tests DS4_CUDA_TESTS="cudabackend_model_test cudabackend_dsv4_model_test cudabackend_glm_dsa_model_test" \
  DS4_CUDA_GROUPED_AB=0 DS4_CUDA_MMA_AB=0 DS4_TEST_TIMEOUT=100 timeout 200 bash bench/cuda-correctness.sh .gpurun tests \
  > "$O/tests/summary.txt" 2>&1
echo "== model suites $(el) s"; cat "$O/tests/summary.txt"; grep -h "expert windows" "$O"/tests/cudabackend_model_test.txt | head -20
tar czf "$O/tests.tgz" -C "$O" tests && rm -rf "${O:?}/tests"
echo "all done $(el) s"
