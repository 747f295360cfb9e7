#!/bin/bash
# A 2-stage pipeline on one machine against one process doing all blocks,
# same file, same threads, greedy decode:
#   bash bench/pipeline-loopback.sh BIN_DIR MODEL B [THREADS] [TOKENS]
# runs `ds4 -p ... --temp 0 -n TOKENS` alone, then as a coordinator (blocks
# 0..B) with one worker (B+1..output) on loopback; prints both decode rates,
# their ratio, and, from a --debug run's telemetry, the per-hop overhead:
# the coordinator's wait for the hop minus what the worker spent (eval +
# send + its own wait): gRPC, loopback and (de)serialization, both ways
# (hidden rows out, logits back).
set -euo pipefail
bin=${1:?usage: pipeline-loopback.sh BIN_DIR MODEL B [THREADS] [TOKENS]}; model=${2:?}; b=${3:?}
threads=${4:-$(nproc)}; n=${5:-64}
prompt="Write a long story about a lighthouse keeper and the sea."
tmp=$(mktemp -d); w=
trap '[ -n "$w" ] && kill -9 $w 2>/dev/null; rm -rf "$tmp"' EXIT
source "$(dirname "$0")/../tests/integration/free_port.sh"  # a port outside the ephemeral range
port=$(free_port)
rate() { sed -n 's/.*generation: \([0-9.]*\) t\/s.*/\1/p' "$1"; }
run_single() { "$bin/ds4" -m "$model" -p "$prompt" --nothink --temp 0 -n "$n" -t "$threads" >/dev/null 2>"$tmp/one.err"; }
run_route() { "$bin/ds4" -m "$model" -p "$prompt" --nothink --temp 0 -n "$n" -t "$threads" --role coordinator \
  --layers "0:$b" --listen 127.0.0.1 "$port" "$@" >/dev/null 2>"$tmp/two.err"; }
"$bin/ds4" -m "$model" --role worker --layers "$((b + 1)):output" --coordinator 127.0.0.1 "$port" -t "$threads" \
  >"$tmp/w.log" 2>&1 &
w=$!
best1=0; best2=0
for i in 1 2 3; do  # best of 3 each, interleaved (a noisy machine)
  run_single; r=$(rate "$tmp/one.err"); best1=$(python3 -c "print(max($best1, $r))")
  run_route; r=$(rate "$tmp/two.err"); best2=$(python3 -c "print(max($best2, $r))")
done
run_route --debug
python3 - "$tmp/two.err" "$best1" "$best2" <<'PY'
import re, sys, statistics as st
lines = open(sys.argv[1]).read().splitlines()
one, two = float(sys.argv[2]), float(sys.argv[3])
steps = {}
for l in lines:
    m = re.match(r"pipeline: step (\d+) hop (\d+) .*: (\d+) rows, eval ([\d.]+) ms, wait ([\d.]+) ms, send ([\d.]+) ms, in (\d+) B, out (\d+) B", l)
    if m:
        s, h = int(m[1]), int(m[2])
        steps.setdefault(s, {})[h] = dict(rows=int(m[3]), eval=float(m[4]), wait=float(m[5]), send=float(m[6]), bin=int(m[7]), bout=int(m[8]))
dec = [v for v in steps.values() if v[0]["rows"] == 1 and 1 in v]
over = [v[0]["wait"] - (v[1]["eval"] + v[1]["send"] + v[1]["wait"]) for v in dec]
print(f"decode: one process {one:.2f} t/s, 2 stages {two:.2f} t/s, ratio {two / one:.3f}")
if over:
    print(f"per-hop overhead (decode steps, n={len(over)}): median {st.median(over):.3f} ms, "
          f"p90 {sorted(over)[int(0.9 * (len(over) - 1))]:.3f} ms; hidden out {dec[0][0]['bout']} B, logits back {dec[0][0]['bin']} B; "
          f"coordinator encode {st.median(v[0]['send'] for v in dec):.3f} ms")
PY
