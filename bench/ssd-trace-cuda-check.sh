#!/bin/bash
# Run on the GPU machine from a folder holding stripped CUDA-built ds4, ds4-gguf, ds4-trace (and libutf8proc.so.2,
# liburing.so.2, libxxhash.so.0, libreadline.so.8 if it lacks them), with this script copied there (carry it).
# On the GPU machine: --ssd-streaming on CUDA with and without the host tier gives the resident logits, and its
# routing trace replays (ds4-trace) to the run's own counts, host-tier hits included.
set -u
B=$(cd "$(dirname "$0")" && pwd); export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
D=$(mktemp -d)
nvidia-smi -L
for arch in qwen3moe deepseek4; do
  m=$D/$arch.gguf
  $B/ds4-gguf synth --arch $arch --preset tiny --no-tokenizer --seed 7 --out $m | tail -1
  awk 'BEGIN{srand(7); for(i=0;i<120;i++) printf "%d ", int(rand()*1000); print ""}' > $D/ids.txt
  for cfg in "3 10 1" "5 20 32" "4 1000 600" "6 0 1" "2 7 1"; do
    read -r dev host chunk <<<"$cfg"
    # The resident run with the same chunk: on CUDA a prefill chunk's size picks its kernels (matvec or
    # cuBLAS, per-pair or grouped experts), so only the same chunking can be bit for bit the same.
    $B/ds4 -m $m --backend cuda --token-ids $D/ids.txt --dump-logits $D/res.bin --prefill-chunk $chunk 2>$D/err \
      || { cat $D/err; exit 1; }
    $B/ds4 -m $m --backend cuda --token-ids $D/ids.txt --dump-logits $D/s.bin --prefill-chunk $chunk --ssd-streaming \
      --ssd-streaming-cache-experts $dev --ssd-streaming-host-cache $host --ssd-streaming-trace-out $D/t.trace 2>$D/err \
      || { cat $D/err; continue; }
    same=$(cmp -s $D/res.bin $D/s.bin && echo identical || echo DIFFER)
    run=$(grep "experts: [0-9]* lookups" $D/err | tail -1 | sed 's/.*experts: \([0-9]*\) lookups, \([0-9]*\) hits ([^)]*), \([0-9]*\) misses (\([0-9]*\) from the host tier, \([0-9]*\) to scratch, \([0-9]*\) evictions;.*/\1 \2 \3 \4 \5 \6/')
    $B/ds4-trace replay $D/t.trace --device-experts $dev --host-experts $host --json $D/r.json >/dev/null
    rep=$(python3 -c "import json; j=json.load(open('$D/r.json')); print(j['lookups'], j['hits'], j['misses'], j['host_hits'], j['scratch_loads'], j['evictions'])")
    echo "$arch dev=$dev host=$host chunk=$chunk logits=$same run=[$run] replay=[$rep] $([ "$run" = "$rep" ] && echo MATCH || echo MISMATCH)"
    grep "host tier" $D/err | head -2
  done
done
