#!/bin/bash
# CUDA correctness on the GPU machine: every CUDA test against the CPU backend, then compute-sanitizer memcheck.
#
# Here (no GPU; the device machine has no package registry, so binaries travel):
#   CUDACXX=/usr/local/cuda/bin/nvcc cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS4_CUDA=ON -DDS4_TESTS=ON
#   ninja -C build-cuda cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test ds4-gguf
#   mkdir -p .gpurun2 /tmp/pk && cp build-cuda/tests/cudabackend_*_test build-cuda/ds4-gguf /tmp/pk/ && strip /tmp/pk/* &&
#     tar cJf .gpurun2/pk.tar.xz -C /tmp/pk .      # ~8 MB; .gpurun2 is git-ignored, carried by the device call
#   plus a llama-quantize Q4_K_M file of a test-llama-archs qwen3moe model as .gpurun2/q4km.gguf (optional: without
#   it cudabackend_model_test makes one, which needs .deps/oracle on the device).
# There (one device call, carry [".gpurun2"]):  bash bench/cuda-correctness.sh .gpurun2
# Output under $OUT: one log per test binary and memcheck logs; the summary on stdout.
set -u
src=${1:?usage: bench/cuda-correctness.sh FOLDER-WITH-pk.tar.xz}
src=$(cd "$src" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"
export DS4_BIN=$B
[ -f "$src/q4km.gguf" ] && export DS4_CUDA_TEST_Q4KM=$src/q4km.gguf
cd "$B" || exit 1
{ nvidia-smi -L; date -u; } > "$O/env.txt" 2>&1
for t in cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test; do
  timeout 200 "./$t" > "$O/$t.txt" 2>&1; echo "$t rc=$?" >> "$O/$t.txt"
done
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|worst" "$O"/cudabackend_*.txt
for t in cudabackend_ops_test cudabackend_dsv4_ops_test; do
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "./$t" > "$O/memcheck-$t.txt" 2>&1
  echo "memcheck $t rc=$?" >> "$O/memcheck-$t.txt"; grep -hE "ERROR SUMMARY|rc=" "$O/memcheck-$t.txt"
done
