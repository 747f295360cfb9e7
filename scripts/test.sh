#!/usr/bin/env bash
# Sets up and runs the whole test suite, as CI does:
#   1. Debian packages, 2. the oracles (llama.cpp library + tools, npm
#   tokenizers), 3. Release build (CUDA code compiled when nvcc exists) and
#   every test, 4. ASan+UBSan build and every test again, 5. the GGUF
#   reader's, the model loaders' and the server request parsers' (OpenAI
#   and Anthropic) fuzzers under libFuzzer for a bounded time each.
# Environment: DS4_JOBS (parallel jobs, default nproc), DS4_FUZZ_SECONDS
# (per fuzzer, default 60), DS4_SKIP_SANITIZE=1 to stop after step 3 (local
# use only).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${DS4_JOBS:-$(nproc)}
export DS4_JOBS=$jobs

bash scripts/install-deps.sh
bash scripts/setup-tests.sh

if [[ -x /usr/local/cuda/bin/nvcc && -z "${CUDACXX:-}" ]]; then export CUDACXX=/usr/local/cuda/bin/nvcc; fi

step() { printf '\n==== %s ====\n' "$*"; }

step "Release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS4_TESTS=ON >/dev/null
cmake --build build -j"$jobs"
step "Release tests"
ctest --test-dir build -j"$jobs" --output-on-failure --timeout 900

if [[ "${DS4_SKIP_SANITIZE:-0}" != 1 ]]; then
  step "ASan+UBSan build"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS4_SANITIZE=ON -DDS4_CUDA=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  step "ASan+UBSan tests"
  # Every test again, but the 5,000-token llama.cpp comparison: the same code
  # paths as the shorter DeepSeek V4 prompts run here, and at ~12 minutes
  # under ASan on two cores it alone would push CI past its time limit.
  # It runs in the Release step above.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions=$root/tests/lsan.supp \
    ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 1800 -E '^DeepSeek4\.LongPromptMatchesLlama$'

  step "libFuzzer: GGUF reader, model loaders, server request parser"
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS4_FUZZ=ON -DDS4_SANITIZE=ON \
        -DDS4_CUDA=OFF -DDS4_TESTS=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz_gguf fuzz_models fuzz_server_request
  for target in fuzz_gguf fuzz_models fuzz_server_request; do
    mkdir -p "build-fuzz/corpus-$target"
    cp "tests/fuzz/corpus/$target"/* "build-fuzz/corpus-$target/"
    build-fuzz/tests/$target -max_total_time="${DS4_FUZZ_SECONDS:-60}" -rss_limit_mb=4096 -max_len=65536 \
        "build-fuzz/corpus-$target" 2>&1 | tail -5
  done
fi
echo "ds4 tests: all passed"
