#!/bin/bash
# GLM-5 (glm-dsa) on CUDA, on the GPU machine: the GLM op pack (GLM-5's shapes among others) and model tests against
# the CPU backend (tiny synth files, llama.cpp's generator file), compute-sanitizer memcheck over both (the tiny
# files), then `ds4 --backend cuda` against `--backend cpu` on the same token ids (logits dumps) and ds4-bench on the
# tiny preset (recorded decode and op by op).
#
# Here (no GPU; binaries travel, the device machine has no package registry):
#   cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS4_CUDA=ON -DDS4_TESTS=ON -DDS4_DEPS_DIR=...
#   ninja -C build cudabackend_glm_dsa_ops_test cudabackend_glm_dsa_model_test ds4 ds4-gguf ds4-bench \
#     llama_strip_scales llama_glm_rewrite llama_realistic
#   bash bench/cuda-glm-check.sh --pack build    # writes .gpurun/glm.tar.xz (git-ignored): binaries, their Debian
#                                                 # libraries and llama.cpp's glm-dsa file made here
# There (carry [".gpurun"]):  bash bench/cuda-glm-check.sh .gpurun [STEPS]   STEPS: a comma list of tests,
# memcheck, run (default all three; one device call allows 10 minutes, so a slow machine takes "tests,run" and
# "memcheck" as two calls)
# Output under $OUT: one log per step, env.txt; the summary on stdout.
set -u
# llama.cpp's generator file, made as the oracle tests make it (tests/oracle/oracle_harness.h realistic_glm_dsa);
# its tools do not travel. Also used by bench/cuda-correctness.sh --pack.
if [ "${1:-}" = "--llama-file" ]; then
  build=${2:?usage: bench/cuda-glm-check.sh --llama-file BUILD_DIR OUT.gguf}; dst=${3:?}
  repo=$(cd "$(dirname "$0")/.." && pwd)
  deps=${DS4_DEPS_DIR:-$repo/.deps}/oracle/bin; g=$(mktemp -d); s=$((RANDOM * 32768 + RANDOM))
  echo "cuda-glm-check: llama.cpp glm-dsa file, model seed $s"
  export LD_LIBRARY_PATH=$deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  { "$deps/test-llama-archs" -a '^(glm-dsa)$' -s $s -o "$g" &&
    "$build/tests/llama_strip_scales" "$g/glm-dsa-moe.gguf" "$g/stripped.gguf" &&
    "$build/tests/llama_glm_rewrite" "$g/stripped.gguf" "$g/rewritten.gguf" --experts 8 --experts-used 3 \
      --expert-groups 4 --groups-used 2 --indexer-top-k 32 --indexer-heads 16 --weights-norm 1 --weights-scale 2.5 \
      --seed $((s + 2)) &&
    "$build/tests/llama_realistic" "$g/rewritten.gguf" "$dst" --seed $((s + 3)); } > "$g/log" 2>&1 ||
    { tail -5 "$g/log" >&2; echo "cuda-glm-check: cannot make the llama.cpp glm-dsa file with $deps" >&2; exit 1; }
  rm -rf "$g"; exit 0
fi
if [ "${1:-}" = "--pack" ]; then
  build=${2:?usage: bench/cuda-glm-check.sh --pack BUILD_DIR}
  repo=$(cd "$(dirname "$0")/.." && pwd)
  ex=$(git -C "$repo" rev-parse --git-common-dir)/info/exclude  # a worktree's .git is a file
  grep -qx '/.gpurun/' "$ex" 2>/dev/null || { mkdir -p "$(dirname "$ex")"; echo '/.gpurun/' >> "$ex"; }
  out=$repo/.gpurun; mkdir -p "$out"; st=$(mktemp -d)
  for t in cudabackend_glm_dsa_ops_test cudabackend_glm_dsa_model_test; do cp "$build/tests/$t" "$st/" || exit 1; done
  cp "$build/ds4" "$build/ds4-gguf" "$build/ds4-bench" "$st/" || exit 1
  strip "$st"/*
  for b in "$st"/*; do ldd "$b"; done | awk '$3 ~ /^\/(usr\/)?lib\/x86_64-linux-gnu\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$st/"; done
  git -C "$repo" rev-parse HEAD > "$st/commit"; git -C "$repo" status --short >> "$st/commit"
  bash "$0" --llama-file "$build" "$st/glm-routed.gguf" || exit 1
  tar cf - -C "$st" . | xz -9 -T1 > "$out/glm.tar.xz" && rm -rf "$st"; du -sh "$out/glm.tar.xz"; exit 0
fi
src=${1:?usage: bench/cuda-glm-check.sh FOLDER-WITH-glm.tar.xz [tests,run,memcheck] | --pack BUILD_DIR}
steps=,${2:-tests,run,memcheck},
step() { case $steps in *,$1,*) return 0 ;; esac; return 1; }
src=$(cd "$src" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc "$src/glm.tar.xz" | tar xf - -C "$B"
export DS4_BIN=$B LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} DS4_CUDA_TEST_GLM=$B/glm-routed.gguf
cd "$B" || exit 1
{ nvidia-smi -L; date -u; cat commit; } > "$O/env.txt" 2>&1
tests="cudabackend_glm_dsa_ops_test cudabackend_glm_dsa_model_test"
summary() { grep -hE "^\[  (PASSED|FAILED|SKIPPED) \] [0-9]|^\[  FAILED |rc=|Failure|worst|planted|excused|batched|seed" "$@" | head -80; }
if step tests; then
  for t in $tests; do
    timeout ${DS4_TEST_TIMEOUT:-300} "./$t" > "$O/$t.txt" 2>&1
    echo "$t rc=$?" >> "$O/$t.txt"
  done
  summary "$O"/cudabackend_*.txt
fi
if step memcheck; then
  # The llama.cpp file's case is left out: the tiny files run every kernel, and the 10 minutes of a call are short.
  for t in $tests; do
    [ $t = cudabackend_glm_dsa_ops_test ] && lim=200 || lim=380
    timeout ${DS4_MEMCHECK_TIMEOUT:-$lim} compute-sanitizer --tool memcheck --error-exitcode 9 "./$t" \
        --gtest_filter='-*LlamaGenerator*' > "$O/memcheck-$t.txt" 2>&1
    echo "memcheck $t rc=$?" >> "$O/memcheck-$t.txt"; grep -hE "ERROR SUMMARY|rc=|^\[  (PASSED|FAILED) " "$O/memcheck-$t.txt"
  done
fi
if step run; then
  # The CLI on both backends: the same token ids, all positions' logits dumped, compared here.
  ./ds4-gguf synth --arch glm-dsa --preset tiny --no-tokenizer --out glm-tiny.gguf > "$O/synth-tiny.txt" 2>&1
  seq 1 300 | awk 'BEGIN{srand()} {printf "%d ", int(rand() * 500)}' > "$O/ids.txt"  # past the top-k of 16
  for be in cpu cuda; do
    ./ds4 -m glm-tiny.gguf --backend $be --token-ids "$O/ids.txt" --dump-logits "$O/logits-$be.bin" > "$O/ds4-$be.txt" 2>&1
    echo "ds4 --backend $be rc=$?" | tee -a "$O/ds4-$be.txt"
  done
  python3 - "$O/logits-cpu.bin" "$O/logits-cuda.bin" <<'PY' 2>&1 | tee "$O/ds4-compare.txt"
import sys, array, math
a, b = (array.array('f', open(p, 'rb').read()) for p in sys.argv[1:3])
num = sum((x - y) ** 2 for x, y in zip(a, b)); den = sum(y * y for y in a)
print(f"ds4 cli logits cuda vs cpu: {len(a)} vs {len(b)} values, relative L2 {math.sqrt(num / den) if den else float('nan'):.3g}")
PY
  # ds4-bench on the tiny preset built in memory, recorded decode and op by op. (GLM-5's own shape waits for
  # ds4-gguf synth to write it quantized: its 192-wide k_b rows are no whole Q2_K/Q4_K blocks.)
  for mode in "" --op-by-op; do
    timeout 200 ./ds4-bench --synthetic glm-dsa-tiny-f32 --backend cuda --ctx-start 256 --ctx-max 1024 --step-mul 2 \
      --gen-tokens 32 $mode > "$O/bench-tiny$mode.txt" 2>&1; echo "ds4-bench tiny $mode rc=$?" >> "$O/bench-tiny$mode.txt"
  done
  tail -n 8 "$O"/bench-*.txt
fi
