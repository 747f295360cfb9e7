#!/bin/bash
# Where one decode step's time goes, kernel by kernel, inside the replayed CUDA graph: ncu's duration of every
# kernel of the last decode step (caches and clocks left alone, so each reads as it does in the step) of
# ds4-bench --parallel N on a 4-block Qwen3-30B-A3B-shaped q4_k_m file, for each N given, float and int8
# activations. The event profile (cuda-parallel-profile.sh) runs ops one by one and counts launch gaps; this
# does not, so the per-layer sum here against the measured step time says what the gaps cost.
#
# Here: bash bench/cuda-correctness.sh --pack build; cp bench/cuda-ncu-step.sh .gpurun/
# There (carry [".gpurun"]): bash .gpurun/cuda-ncu-step.sh [N...]   (default 1 8)
# Output under $OUT: ncu-MODE-N.csv (raw) and the per-kernel table of the last step on stdout.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; B=$(mktemp -d); src=$(cd "$(dirname "$0")" && pwd)
xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
ns=${*:-1 8}
F=/dev/shm/q4-4l.gguf
[ -f "$F" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 4 --no-tokenizer \
  --seed 1 --out "$F" > "$O/synth.log" 2>&1 || { tail -3 "$O/synth.log"; exit 1; }
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for mode in ${DS4_NCU_MODES:-float int8}; do
  flag=; [ $mode = int8 ] && flag=--int8-activations
  for n in $ns; do
    timeout 150 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size \
      --csv --page raw "$B/ds4-bench" -m "$F" --backend cuda $flag --ctx-start 512 --ctx-max 512 --step-incr 1 \
      --gen-tokens 4 --prefill-chunk 512 --parallel "$n" > "$O/ncu-$mode-$n.csv" 2> "$O/ncu-$mode-$n.log"
    echo "== $mode N=$n (ncu rc=$?)"
    python3 - "$O/ncu-$mode-$n.csv" <<'PY'
import csv, sys, re, collections
rows = []
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
r = csv.reader(lines)
head = next(r, None)
if not head: print("no kernels"); sys.exit()
ki, ti, gi = head.index("Kernel Name"), head.index("gpu__time_duration.sum"), head.index("launch__grid_size")
for row in r:
    v = row[ti].replace(',', '') if len(row) > ti else ''
    if not v.replace('.', '', 1).isdigit(): continue  # the units row
    name = re.sub(r"\(.*", "", row[ki]).replace("void ", "")
    rows.append((re.sub(r"ds4::(cuda::)?|<unnamed>::|\(anonymous namespace\)::", "", name), float(v), row[gi]))
# Decode steps: every kernel after the prefill's last GEMM (decode runs none); a step has one routing kernel
# per block (4 blocks), so the table is per step.
last = max([i for i, k in enumerate(rows) if "gemm" in k[0] or "sgemm" in k[0]] + [-1])
step = rows[last + 1:]
n_steps = max(1, sum(1 for k in step if k[0].startswith("route_kernel")) // 4)
tot = collections.defaultdict(lambda: [0.0, 0, ""])
for name, ns_, grid in step:
    t = tot[name]; t[0] += ns_ / n_steps; t[1] += 1; t[2] = grid
all_ns = sum(v[0] for v in tot.values())
print(f"{n_steps} decode steps; per step: {len(step) // n_steps} kernels, sum of durations {all_ns/1e3:.1f} us")
for name, (ns_, c, grid) in sorted(tot.items(), key=lambda x: -x[1][0]):
    print(f"  {ns_/1e3:9.1f} us {100*ns_/all_ns:5.1f}%  x{c // n_steps:<3} {ns_*n_steps/c/1e3:7.2f} us/call  grid {grid:>8}  {name[:90]}")
PY
  done
done
