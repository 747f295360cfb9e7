#!/usr/bin/env python3
"""Per-kernel table of one replayed decode step from ncu's raw CSV (--metrics gpu__time_duration.sum,
launch__grid_size --csv --page raw) of a ds4-bench run on a 4-block Qwen3-MoE file: the kernels after the
prefill's last GEMM, divided by the number of steps (one routing kernel per block, or STEPS when given: any
family). Used by bench/cuda-ncu-step.sh and bench/cuda-pdl-ab.sh. Usage: ncu_step_table.py FILE.csv [STEPS]"""
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
n_steps = int(sys.argv[2]) if len(sys.argv) > 2 else max(1, sum(1 for k in step if k[0].startswith("route_kernel")) // 4)
tot = collections.defaultdict(lambda: [0.0, 0, ""])
for name, ns_, grid in step:
    t = tot[name]; t[0] += ns_ / n_steps; t[1] += 1; t[2] = grid
all_ns = sum(v[0] for v in tot.values())
print(f"{n_steps} decode steps; per step: {len(step) // n_steps} kernels, sum of durations {all_ns/1e3:.1f} us")
for name, (ns_, c, grid) in sorted(tot.items(), key=lambda x: -x[1][0]):
    print(f"  {ns_/1e3:9.1f} us {100*ns_/all_ns:5.1f}%  x{c // n_steps:<3} {ns_*n_steps/c/1e3:7.2f} us/call  grid {grid:>8}  {name[:90]}")
