#!/bin/bash
# What each part of a CUDA decode step costs inside the replayed graph (issue 13): the replay's device time
# (DS4_CUDA_STEP_TIMING median) of ds4-bench on a Qwen3-30B-A3B-shaped q4_k_m file at depth 512, whole and with
# one part knocked out at a time (DS4_CUDA_KNOCKOUT, src/backend/cuda/op_knockout.h: the part's outputs zeroed
# instead of computed). The whole step runs between every two knockouts, so drift shows.
# Here:  bash bench/cuda-correctness.sh --pack build   (or any pack with ds4-bench and ds4-gguf)
# There (carry the pack's folder): bash bench/cuda-knockout.sh PACK_FOLDER [PART...]
# Output: a table on stdout, logs under $OUT.
set -u
src=$(cd "${1:?usage: bench/cuda-knockout.sh FOLDER-WITH-pk.tar.xz [PART...]}" && pwd); shift
parts=${*:-"attn_q. attn_k.,attn_v. attn_output. =output.weight attention moe rms_norm split qk_norm_rope"}
O=${OUT:-/tmp/out}; mkdir -p "$O/knockout"
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
f=/dev/shm/q30b-q4km.gguf
[ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
  --out "$f" > "$O/knockout/synth.log" 2>&1 || { echo "synth failed"; exit 1; }
step() {  # the replay's median device time, ms
  DS4_CUDA_STEP_TIMING=1 DS4_CUDA_KNOCKOUT="$2" timeout 90 "$B/ds4-bench" -m "$f" --backend cuda --ctx-start 512 \
    --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512 > /dev/null 2> "$O/knockout/$1.txt"
  sed -n 's/.*device time per replay median \([0-9.]*\) ms.*/\1/p' "$O/knockout/$1.txt" | tail -1
}
echo "| knocked out | step ms | whole step before / after, ms | the part's cost, ms (us a layer of 48) |"
echo "| --- | ---: | ---: | ---: |"
i=0; prev=$(step whole-$i "")
for p in $parts; do
  k=$(step "ko-${p//[^a-zA-Z0-9_]/_}" "$p"); i=$((i + 1)); next=$(step whole-$i "")
  python3 -c "
import sys
p, k, a, b = sys.argv[1], float(sys.argv[2] or 'nan'), float(sys.argv[3] or 'nan'), float(sys.argv[4] or 'nan')
w = (a + b) / 2
print(f'| {p} | {k:.3f} | {a:.3f} / {b:.3f} | {w - k:.3f} ({(w - k) / 48 * 1000:.1f}) |')" "$p" "$k" "$prev" "$next"
  prev=$next
done
