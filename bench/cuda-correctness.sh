#!/bin/bash
# CUDA correctness on the GPU machine: every CUDA test binary against the CPU backend (tiny models, the real-shape
# Qwen3-30B-A3B and DeepSeek V4 Flash truncations, the planted-bug checks), then compute-sanitizer memcheck over
# every CUDA test binary (all but the real-shape cases, which memcheck would take hours over).
#
# Here (no GPU; the device machine has no package registry, so binaries travel):
#   CUDACXX=/usr/local/cuda/bin/nvcc cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS4_CUDA=ON -DDS4_TESTS=ON
#   ninja -C build llama_strip_scales llama_glm_rewrite llama_realistic cudabackend_f16_prefill_test cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test cudabackend_glm_dsa_ops_test cudabackend_glm_dsa_model_test ds4-gguf
#   bash bench/cuda-correctness.sh --pack build     # writes .gpurun/pk.tar.xz and .gpurun/q4km.gguf (git-ignored);
#                                                   # the pack holds ds4-bench too (bench/parallel-decode.sh uses it),
#                                                   # and .gpurun/glm-routed.gguf (llama.cpp's glm-dsa file)
# There (carry [".gpurun"]):  bash bench/cuda-correctness.sh .gpurun [tests|memcheck]   (default both; one device
# call allows 10 minutes, so a slow run takes the two halves as two calls)
# Output under $OUT: one log per test binary, one memcheck log per binary, env.txt; the summary on stdout.
set -u
if [ "${1:-}" = "--pack" ]; then
  build=${2:?usage: bench/cuda-correctness.sh --pack BUILD_DIR}
  repo=$(cd "$(dirname "$0")/.." && pwd)
  grep -qx '/.gpurun/' "$repo/.git/info/exclude" 2>/dev/null || { mkdir -p "$repo/.git/info"; echo '/.gpurun/' >> "$repo/.git/info/exclude"; }
  out=$repo/.gpurun; mkdir -p "$out"; st=$(mktemp -d)
  for t in cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test cudabackend_glm_dsa_ops_test cudabackend_glm_dsa_model_test cudabackend_f16_prefill_test; do
    cp "$build/tests/$t" "$st/" || exit 1
  done
  cp "$build/ds4-gguf" "$build/ds4-bench" "$build/ds4" "$st/" && strip "$st"/*  # ds4: bench/cuda-accuracy.sh
  # Debian libraries the GPU machine's image may lack (httplib, utf8proc, xxhash, zstd, lz4, gRPC, ...)
  # travel beside the binaries (LD_LIBRARY_PATH there); glibc, libstdc++ and CUDA's own stay.
  for b in "$st"/*; do ldd "$b"; done | awk '$3 ~ /^\/(usr\/)?lib\/x86_64-linux-gnu\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$st/"; done
  git -C "$repo" rev-parse HEAD > "$st/commit"; git -C "$repo" status --short >> "$st/commit"
  # xz -9 in one thread: its 64 MiB dictionary spans the test binaries, which carry the same CUDA code (half the
  # size of xz -6's; the carried tree is limited to 64 MiB)
  tar cf - -C "$st" . | xz -9 -T1 > "$out/pk.tar.xz" && rm -rf "$st"
  # The Q4_K_M case needs llama.cpp's generator and quantizer, which do not travel: make the file here.
  deps=${DS4_DEPS_DIR:-$repo/.deps}/oracle/bin; g=$(mktemp -d)
  LD_LIBRARY_PATH=$deps "$deps/test-llama-archs" -a '^(qwen3moe)$' -s $RANDOM -o "$g" >/dev/null 2>&1 &&
    LD_LIBRARY_PATH=$deps "$deps/llama-quantize" "$g/qwen3moe-moe.gguf" "$out/q4km.gguf" Q4_K_M 2 >/dev/null 2>&1 ||
    { echo "cuda-correctness: cannot make the Q4_K_M file with $deps" >&2; exit 1; }
  rm -rf "$g"
  bash "$repo/bench/cuda-glm-check.sh" --llama-file "$build" "$out/glm-routed.gguf" || exit 1  # GLM's llama.cpp case
  du -sh "$out"/*; exit 0
fi
src=${1:?usage: bench/cuda-correctness.sh FOLDER-WITH-pk.tar.xz [tests|memcheck] | --pack BUILD_DIR}
what=${2:-both}
src=$(cd "$src" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"
export DS4_BIN=$B LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -f "$src/q4km.gguf" ] && export DS4_CUDA_TEST_Q4KM=$src/q4km.gguf
[ -f "$src/glm-routed.gguf" ] && export DS4_CUDA_TEST_GLM=$src/glm-routed.gguf
cd "$B" || exit 1
{ nvidia-smi -L; date -u; cat commit; } > "$O/env.txt" 2>&1
# DS4_CUDA_TESTS: a subset of the binaries (a call's time is short); DS4_CUDA_GROUPED_AB=0 skips the grouped runs.
tests=${DS4_CUDA_TESTS:-"cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test cudabackend_glm_dsa_ops_test cudabackend_glm_dsa_model_test cudabackend_f16_prefill_test"}
[ "$what" = memcheck ] || for t in $tests; do
  timeout ${DS4_TEST_TIMEOUT:-400} "./$t" > "$O/$t.txt" 2>&1; echo "$t rc=$?" >> "$O/$t.txt"
done
# The MoE batch paths chosen by size: each forced for every batch once (DS4_CUDA_MOE_GROUPED, read once per process).
[ "$what" = memcheck ] || [ "${DS4_CUDA_GROUPED_AB:-1}" = 0 ] || for g in 0 1; do
  DS4_CUDA_MOE_GROUPED=$g timeout ${DS4_TEST_TIMEOUT:-400} ./cudabackend_ops_test --gtest_filter='*Moe*:*Matmul*' \
    > "$O/cudabackend_ops_test-grouped$g.txt" 2>&1; echo "cudabackend_ops_test (grouped=$g) rc=$?" >> "$O/cudabackend_ops_test-grouped$g.txt"
  DS4_CUDA_MOE_GROUPED=$g timeout ${DS4_TEST_TIMEOUT:-400} ./cudabackend_model_test --gtest_filter='-*RealShape*' \
    > "$O/cudabackend_model_test-grouped$g.txt" 2>&1; echo "cudabackend_model_test (grouped=$g) rc=$?" >> "$O/cudabackend_model_test-grouped$g.txt"
done
# The opt-in tensor-core experts (moe_split_mma.cu), both kernels: the MoE tests (CPU bound, batch = alone) and the
# model suite with them on (DS4_CUDA_MMA_AB=0 skips).
[ "$what" = memcheck ] || [ "${DS4_CUDA_MMA_AB:-1}" = 0 ] || for st in 0 1; do
  DS4_CUDA_MOE_MMA=1 DS4_CUDA_MOE_MMA_STREAM=$st timeout ${DS4_TEST_TIMEOUT:-400} ./cudabackend_ops_test \
    --gtest_filter='*Moe*' > "$O/cudabackend_ops_test-mma$st.txt" 2>&1
  echo "cudabackend_ops_test (moe mma, stream=$st) rc=$?" >> "$O/cudabackend_ops_test-mma$st.txt"
  DS4_CUDA_MOE_MMA=1 DS4_CUDA_MOE_MMA_STREAM=$st timeout ${DS4_TEST_TIMEOUT:-400} ./cudabackend_model_test \
    > "$O/cudabackend_model_test-mma$st.txt" 2>&1
  echo "cudabackend_model_test (moe mma, stream=$st) rc=$?" >> "$O/cudabackend_model_test-mma$st.txt"
done
[ "$what" = memcheck ] || grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|worst|planted|excused" "$O"/cudabackend_*.txt
[ "$what" = tests ] || for t in $tests; do
  timeout ${DS4_MEMCHECK_TIMEOUT:-600} compute-sanitizer --tool memcheck --error-exitcode 9 "./$t" \
      --gtest_filter='-*RealShape*' > "$O/memcheck-$t.txt" 2>&1
  echo "memcheck $t rc=$?" >> "$O/memcheck-$t.txt"; grep -hE "ERROR SUMMARY|rc=|^\[  (PASSED|FAILED) " "$O/memcheck-$t.txt"
done
