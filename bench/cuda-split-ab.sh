#!/bin/bash
# One device call for the split-activation MoE pair (moe_split.cu, issue 9): the CUDA op and model test binaries
# (the split pair is the default, so every Q4_K MoE case runs it; the real-shape Qwen3-30B-A3B q4_k_m case among
# them; DeepSeek V4 and GLM-5 model tests for the per-pair down kernels they share), the MoE op tests again on the
# float kernels (DS4_CUDA_MOE_SPLIT=0), compute-sanitizer memcheck of the MoE op tests and the tiny model tests,
# then ds4-bench decode on the Qwen3-30B-A3B-shaped q4_k_m file at ctx 512 for N = 1, 8, 16, 32 sequences, split
# and float interleaved (N = 1 also at ctx 4096), ncu durations of an 8-sequence step's MoE kernels both ways and
# ncu's sections (occupancy, warp stalls) over the split step's kernels (4-block file).
#
# Here: bash bench/cuda-split-ab.sh --pack build    (writes .gpu/split.tar.xz and .gpu/q4km.gguf, git-ignored)
# There (carry [".gpu"]): bash bench/cuda-split-ab.sh .gpu   (output under $OUT, summary on stdout)
set -u
if [ "${1:-}" = "--pack" ]; then
  build=${2:?usage: bench/cuda-split-ab.sh --pack BUILD_DIR}
  repo=$(cd "$(dirname "$0")/.." && pwd); out=$repo/.gpu; mkdir -p "$out"; st=$(mktemp -d)
  grep -qx '/.gpu/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.gpu/' >> "$repo/.git/info/exclude"
  cp "$build/tests/cudabackend_ops_test" "$build/tests/cudabackend_model_test" "$build/tests/cudabackend_dsv4_model_test" \
    "$build/tests/cudabackend_glm_dsa_model_test" "$build/ds4-bench" "$build/ds4-gguf" "$st/" && strip "$st"/* || exit 1
  for b in "$st"/*; do ldd "$b"; done | awk '$3 ~ /^\/(usr\/)?lib\/x86_64-linux-gnu\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$st/"; done
  git -C "$repo" rev-parse HEAD > "$st/commit"; git -C "$repo" status --short >> "$st/commit"
  tar cf - -C "$st" . | xz -9 -T1 > "$out/split.tar.xz" && rm -rf "$st"
  if [ ! -f "$out/q4km.gguf" ]; then  # llama.cpp's generator and quantizer do not travel: the file is made here
    deps=${DS4_DEPS_DIR:-$repo/.deps}/oracle/bin; g=$(mktemp -d)
    LD_LIBRARY_PATH=$deps "$deps/test-llama-archs" -a '^(qwen3moe)$' -s $RANDOM -o "$g" >/dev/null 2>&1 &&
      LD_LIBRARY_PATH=$deps "$deps/llama-quantize" "$g/qwen3moe-moe.gguf" "$out/q4km.gguf" Q4_K_M 2 >/dev/null 2>&1 ||
      { echo "cuda-split-ab: cannot make the Q4_K_M file with $deps" >&2; exit 1; }
    rm -rf "$g"
  fi
  du -sh "$out"/split.tar.xz "$out"/q4km.gguf; exit 0
fi
src=$(cd "${1:?usage: bench/cuda-split-ab.sh FOLDER | --pack BUILD_DIR}" && pwd)
T0=$(date +%s); O=${OUT:-/tmp/out}; mkdir -p "$O"; W=$(mktemp -d)
B=$(mktemp -d); xz -dc "$src/split.tar.xz" | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B DS4_CUDA_TEST_Q4KM=$src/q4km.gguf DS4_BIN=$B
{ nvidia-smi -L; cat "$B/commit"; } > "$O/summary.txt" 2>&1
f=/dev/shm/q30b-q4km.gguf; f4=/dev/shm/q30b-q4km-4l.gguf
( [ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
    --out "$f" > "$W/synth.log" 2>&1
  "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 4 --no-tokenizer --seed 1 \
    --out "$f4" >> "$W/synth.log" 2>&1 ) &
( cd "$B"
  ( timeout 300 ./cudabackend_ops_test > "$W/ops.txt" 2>&1; echo "cudabackend_ops_test rc=$?" >> "$W/ops.txt" ) &
  ( timeout 300 ./cudabackend_model_test > "$W/model.txt" 2>&1; echo "cudabackend_model_test rc=$?" >> "$W/model.txt" ) &
  ( timeout 300 ./cudabackend_dsv4_model_test > "$W/dsv4.txt" 2>&1; echo "cudabackend_dsv4_model_test rc=$?" >> "$W/dsv4.txt" ) &
  ( timeout 300 ./cudabackend_glm_dsa_model_test --gtest_filter='-*LlamaGenerator*' > "$W/glm.txt" 2>&1
    echo "cudabackend_glm_dsa_model_test rc=$?" >> "$W/glm.txt" ) &
  ( DS4_CUDA_MOE_SPLIT=0 timeout 300 ./cudabackend_ops_test --gtest_filter='*Moe*' > "$W/ops-float.txt" 2>&1
    echo "cudabackend_ops_test *Moe* (split off) rc=$?" >> "$W/ops-float.txt" ) &
  ( timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 ./cudabackend_ops_test --gtest_filter='*Moe*' \
      > "$W/memcheck-ops.txt" 2>&1; echo "memcheck ops *Moe* rc=$?" >> "$W/memcheck-ops.txt" ) &
  ( timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 ./cudabackend_model_test \
      --gtest_filter='-*RealShape*:*LlamaGenerator*' > "$W/memcheck-model.txt" 2>&1
    echo "memcheck model rc=$?" >> "$W/memcheck-model.txt" ) &
  wait )
wait
{ echo "== tests ($(( $(date +%s) - T0 )) s)"
  grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|ERROR SUMMARY|qwen3-30b-a3b|q4_k_m decode|Q4_K" "$W"/ops*.txt "$W"/model.txt \
    "$W"/dsv4.txt "$W"/glm.txt "$W"/memcheck-*.txt | head -80; } >> "$O/summary.txt"
run() {  # label, env split value, ds4-bench args
  local label=$1 sp=$2; shift 2
  DS4_CUDA_MOE_SPLIT=$sp timeout 120 "$B/ds4-bench" -m "$f" --backend cuda --gen-tokens 128 --prefill-chunk 512 "$@" \
    > "$W/$label.csv" 2> "$W/$label.log"; echo "$label: $(grep -v '^ctx' "$W/$label.csv" | tr '\n' ' ')" >> "$O/summary.txt"
}
echo "== ds4-bench decode ($(( $(date +%s) - T0 )) s), split (s) and float (f)" >> "$O/summary.txt"
w=(--ctx-start 512 --ctx-max 512 --step-incr 1)
for n in 1 8 16 32; do
  p=(); [ $n -gt 1 ] && p=(--parallel $n)
  run s$n 1 "${w[@]}" "${p[@]}"; run f$n 0 "${w[@]}" "${p[@]}"
done
run s1-4096 1 --ctx-start 4096 --ctx-max 4096 --step-incr 1; run f1-4096 0 --ctx-start 4096 --ctx-max 4096 --step-incr 1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ $(( $(date +%s) - T0 )) -lt 420 ] && [ -n "$NCU" ]; then
  for sp in 1 0; do
    DS4_CUDA_MOE_SPLIT=$sp timeout 60 "$NCU" --clock-control none -k regex:"expert_gate_up|expert_down_combine|quantize_rows_split" -c 16 \
      "$B/ds4-bench" -m "$f4" --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 2 \
      --prefill-chunk 512 --parallel 8 > "$W/ncu-split$sp.txt" 2>&1
    echo "== ncu, split=$sp: kernel, duration" >> "$O/summary.txt"
    awk '/^  [a-zA-Z_].*\(/{k=$0; sub(/\(.*/, "", k); sub(/^ +(void )?/, "", k)} /^ +Duration/{print k, $(NF-1), $NF}' "$W/ncu-split$sp.txt" | tail -8 >> "$O/summary.txt"
  done
fi
if [ $(( $(date +%s) - T0 )) -lt 480 ] && [ -n "$NCU" ]; then
  timeout 90 "$NCU" --clock-control none -k regex:"expert_gate_up|expert_down_combine|quantize_rows_split|matvec_warp_kernel" -c 24 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats "$B/ds4-bench" -m "$f4" \
    --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 2 --prefill-chunk 512 --parallel 8 \
    > "$W/ncu-sections.txt" 2>&1
  echo "== ncu sections (rc=$?): $W/ncu-sections.txt in logs" >> "$O/summary.txt"
fi
echo "== done ($(( $(date +%s) - T0 )) s)" >> "$O/summary.txt"
tar cJf "$O/logs.tar.xz" -C "$W" . ; cat "$O/summary.txt"
