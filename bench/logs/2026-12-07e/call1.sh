#!/bin/bash
# Session 2026-12-07e, first call: compute-sanitizer memcheck over the expert windows' CUDA test (never run under
# memcheck: cuda_expert_windows.cpp, count_experts), then 2026-12-07d/call4.sh (the windows' swap budget).
# Carry [".gpurun", ".gpurun4"] (.gpurun: `bash bench/cuda-correctness.sh --pack build-cuda` of 5240a71's CUDA code,
# glm-routed.gguf moved aside; .gpurun4: call4's pack of main).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O/m"; T0=$(date +%s)
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DS4_BIN=$B LD_LIBRARY_PATH=$B DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf timeout 240 "$CS" --tool memcheck \
  --leak-check no --error-exitcode 9 "$B/cudabackend_model_test" --gtest_filter='*ExpertWindows*' > "$O/m/windows-memcheck.txt" 2>&1
echo "== windows memcheck rc=$? $(( $(date +%s) - T0 )) s"; grep -E "ERROR SUMMARY|OK \]|PASSED|FAILED" "$O/m/windows-memcheck.txt" | head
rm -rf "$B"
bash bench/logs/2026-12-07d/call4.sh
