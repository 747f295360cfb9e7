#!/bin/bash
# Batched decode on the GPU machine: ds4-bench --parallel N on a Qwen3-30B-A3B-shaped Q4_K_M file (random weights,
# real shape), N = 1, 2, 4, 8, 16, 32 sequences per forward pass. Decode reads the weights once per step for every
# sequence in it, so aggregate tokens/s should grow nearly N-fold until the step stops being bound by the weights.
# N = 1 also runs the frontiers vs-llama.sh uses (512 and 4096), to compare single-sequence speed with earlier runs.
#
# Here: bash bench/cuda-correctness.sh --pack build   (.gpurun/pk.tar.xz with ds4-bench and ds4-gguf)
# There (carry [".gpurun"]): bash bench/parallel-decode.sh .gpurun [N...]
# Output under $OUT: par-N.json per N; the CSVs, logs and synth.log in $OUT/logs; a table on stdout.
set -u
src=$(cd "${1:?usage: bench/parallel-decode.sh FOLDER-WITH-pk.tar.xz [N...]}" && pwd); shift
ns=${*:-1 2 4 8 16 32}
O=${OUT:-/tmp/out}; L=$O/logs; mkdir -p "$O" "$L"
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
f=/dev/shm/q30b-q4km.gguf
if [ ! -f "$f" ]; then
  /usr/bin/time -v "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
    --out "$f" > "$L/synth.log" 2>&1 || { tail -5 "$L/synth.log"; exit 1; }
fi
for n in $ns; do
  if [ "$n" = 1 ]; then walk=(--ctx-start 512 --ctx-max 4096 --step-mul 8); else walk=(--ctx-start 512 --ctx-max 512 --step-incr 1); fi
  timeout 300 "$B/ds4-bench" -m "$f" --backend cuda "${walk[@]}" --gen-tokens 128 --prefill-chunk 512 --parallel "$n" \
    --json "$O/par-$n.json" > "$L/par-$n.csv" 2> "$L/par-$n.log" || { echo "N=$n failed:"; tail -3 "$L/par-$n.log"; }
done
echo "| N | ctx | prefill t/s (all) | decode t/s (all) | decode t/s (each) | x N=1 |"
echo "| --- | --- | --- | --- | --- | --- |"
python3 - "$O" $ns <<'PY'
import json, sys, os
out, ns = sys.argv[1], sys.argv[2:]
base = None
for n in ns:
    p = os.path.join(out, f"par-{n}.json")
    if not os.path.exists(p) or os.path.getsize(p) == 0:
        print(f"| {n} | - | - | - | - | - |"); continue
    for r in json.load(open(p))["rows"]:
        if r["ctx"] == 512 and base is None: base = r["gen_tps"]
        ratio = f"{r['gen_tps'] / base:.2f}" if base and r["ctx"] == 512 else "-"
        print(f"| {n} | {r['ctx']} | {r['prefill_tps']:.0f} | {r['gen_tps']:.1f} | {r['gen_tps_per_seq']:.1f} | {ratio} |")
PY
