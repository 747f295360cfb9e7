#!/bin/bash
# Run on the GPU machine from a folder holding stripped ds4-bench, ds4-gguf (and libutf8proc.so.2): OUT=... bash bench/ssd-streaming-sync.sh
# (carry the folder; it looks for the binaries beside itself, so copy this script there).
# ds4-bench on the 8-block Flash q2 file: resident, then --ssd-streaming at a few cache budgets (synchronous reads).
set -u
B=$(cd "$(dirname "$0")" && pwd); export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
D=$(mktemp -d)
$B/ds4-gguf synth --arch deepseek4 --preset flash --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out $D/f8.gguf | tail -1
W="--ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 32 --prefill-chunk 512"
$B/ds4-bench -m $D/f8.gguf $W --json $OUT/resident.json 2>&1 | grep -E "ctx "
for b in 2048 96 48; do
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "(page cache dropped)"
  timeout 150 $B/ds4-bench -m $D/f8.gguf $W --ssd-streaming --ssd-streaming-cache-experts $b --json $OUT/ssd-$b.json 2>&1 | grep -E "ctx |experts:|ssd-streaming:"
done
