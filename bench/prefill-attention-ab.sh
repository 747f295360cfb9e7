#!/bin/bash
# Prefill attention on the tensor cores (attention_tc.cu) in one device call: its correctness tests, prefill at
# depth with and without it (DS4_CUDA_ATTN_TC=0) on the Qwen3-30B-A3B-shaped q4_k_m file, then issue 10's server
# load on ds4-server alone (bench/server-vs-llama-h200.sh without llama.cpp), whose prompts are prefilled at
# depth ~2k behind a shared system prefix.
#
# Here:  bash bench/server-vs-llama-h200.sh --pack BUILD_DIR      (-> .gpu/srv.tar.xz with ds4-bench, ...)
#        bash bench/prefill-attention-ab.sh --pack BUILD_DIR      (-> .gpu/tests.tar.xz: the CUDA test binaries)
# There (carry [".gpu"]): bash bench/prefill-attention-ab.sh .gpu   (output under $OUT)
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
tests="cudabackend_f16_prefill_test cudabackend_ops_test cudabackend_model_test"
if [ "${1:-}" = "--pack" ]; then
  build=${2:?usage: bench/prefill-attention-ab.sh --pack BUILD_DIR}; st=$(mktemp -d)
  for t in $tests; do cp "$build/tests/$t" "$st/" || exit 1; done
  strip "$st"/*; tar cf - -C "$st" . | xz -9 -T1 > "$repo/.gpu/tests.tar.xz" && rm -rf "$st"; du -sh "$repo/.gpu"/*; exit 0
fi
src=$(cd "${1:?usage: bench/prefill-attention-ab.sh FOLDER | --pack BUILD_DIR}" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"; B=$(mktemp -d)
xz -dc "$src/srv.tar.xz" | tar xf - -C "$B"; xz -dc "$src/tests.tar.xz" | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B DS4_BIN=$B
{ nvidia-smi -L; cat "$B/commit"; } > "$O/env.txt" 2>&1
for t in $tests; do
  filter='*'; [ "$t" = cudabackend_ops_test ] && filter='*Attention*:*Recorded*'
  timeout 300 "$B/$t" --gtest_filter="$filter" > "$O/$t.txt" 2>&1; echo "$t rc=$?" | tee -a "$O/summary.txt"
  grep -E "^\[  (FAILED|PASSED) |Failure|relative error" "$O/$t.txt" | head -8
done
f=/dev/shm/q30b-q4km-tok.gguf; tok=$(mktemp -d); tar -C "$tok" -xJf "$src/qwen3-tok.tar.xz"
[ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --seed 1 \
  --tokenizer-dir "$tok" --out "$f" > "$O/synth.log" 2>&1 || { tail -3 "$O/synth.log"; exit 1; }
# Prefill of each 512-token interval at its depth (and a 16-token decode probe at each frontier).
for tc in 0 1; do
  DS4_CUDA_ATTN_TC=$tc timeout 200 "$B/ds4-bench" -m "$f" --backend cuda --ctx-start 512 --ctx-max 4096 \
    --step-incr 512 --gen-tokens 16 > "$O/walk-tc$tc.txt" 2>&1
  echo "== walk DS4_CUDA_ATTN_TC=$tc" | tee -a "$O/summary.txt"; tail -9 "$O/walk-tc$tc.txt" | tee -a "$O/summary.txt"
done
LLAMA_SERVER=/nonexistent OUT=$O/server bash "$repo/bench/server-vs-llama-h200.sh" "$src" > /dev/null 2>&1
cat "$O/server/summary.txt" | tee -a "$O/summary.txt"
