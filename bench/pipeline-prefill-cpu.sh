#!/bin/bash
# Pipelined prefill on this CPU machine: a 2-stage route on loopback, each
# stage pinned to its own core (taskset, -t 1), against one process pinned to
# one core doing every block, on a synthetic model large enough that compute
# dominates:
#   bash bench/pipeline-prefill-cpu.sh BIN_DIR [TOKENS] [REPS] [N_LAYER] [CHUNK] [WINDOW]
# writes `ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q8_0
# --n-layer N_LAYER` (full-width blocks, default 2; the coordinator runs the
# first half, the worker the rest and the head), a prompt of about TOKENS
# tokens (default 4096), then runs `ds4 --prompt-file P -n 1` REPS times each
# (default 3), interleaved: one process; the route with --dist-prefill-window
# WINDOW (default 4) at --prefill-chunk CHUNK (default 256); in the first
# repetition also the same route with a window of 1 (one chunk at a time
# along the route, the old way). Prints each run's prefill t/s and min/median
# per configuration. DS4_BENCH_NICE=N runs every process under `nice -n N`
# and, where the kernel groups tasks by session (autogroup, which makes nice
# count only inside a session), gives this session's group that nice too: a
# negative N, as root, holds the cores against other work on a shared
# machine.
set -euo pipefail
bin=${1:?usage: pipeline-prefill-cpu.sh BIN_DIR [TOKENS] [REPS] [N_LAYER] [CHUNK] [WINDOW]}
tokens=${2:-4096}; reps=${3:-3}; nl=${4:-2}; chunk=${5:-256}; window=${6:-4}
tmp=${DS4_BENCH_TMP:-$(mktemp -d)}; w=
trap '[ -n "$w" ] && kill -9 $w 2>/dev/null; [ -z "${DS4_BENCH_TMP:-}" ] && rm -rf "$tmp"; true' EXIT
trap 'exit 130' INT TERM  # the EXIT trap then stops the worker too
m=$tmp/q30-$nl.gguf
[ -f "$m" ] || "$bin/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q8_0 --n-layer "$nl" --seed 1 \
  --out "$m" >/dev/null
# Words from a fixed list: 1.05 tokens each with the Qwen3 tokenizer
# (measured: 4,072 words and the chat template are 4,270 tokens).
python3 -c "
import random; r = random.Random(7)
w = 'the sea light keeper stone night wind ship rope bell storm harbor island tide cliff lamp glass wave salt gull'.split()
print(' '.join(r.choice(w) for _ in range(($tokens - 16) * 100 // 105)))" >"$tmp/prompt.txt"
b=$((nl / 2 - 1))
source "$(dirname "$0")/../tests/integration/free_port.sh"  # a port outside the ephemeral range
port=$(free_port)
common=(--prompt-file "$tmp/prompt.txt" --nothink --temp 0 -n 1 -t 1 --ctx $((tokens + 512)) --prefill-chunk "$chunk")
if [[ -n "${DS4_BENCH_NICE:-}" && -w /proc/self/autogroup ]]; then echo "$DS4_BENCH_NICE" >/proc/self/autogroup; fi
run() { nice -n "${DS4_BENCH_NICE:-0}" taskset -c "$@"; }
rate() { sed -n 's/.*prefill: \([0-9.]*\) t\/s.*/\1/p' "$1"; }
# Not through run(): a backgrounded function is a subshell, and $! must be the worker itself.
nice -n "${DS4_BENCH_NICE:-0}" taskset -c 1 "$bin/ds4" -m "$m" --role worker --layers "$((b + 1)):output" --coordinator 127.0.0.1 "$port" -t 1 \
  --ctx $((tokens + 512)) >"$tmp/w.log" 2>&1 &
w=$!
declare -A runs
for ((i = 1; i <= reps; i++)); do
  run 0 "$bin/ds4" -m "$m" "${common[@]}" >/dev/null 2>"$tmp/one.err"
  runs[one]+=" $(rate "$tmp/one.err")"
  wins=("$window"); ((i == 1)) && wins+=(1)
  for win in "${wins[@]}"; do
    run 0 "$bin/ds4" -m "$m" "${common[@]}" --role coordinator --layers "0:$b" --listen 127.0.0.1 "$port" \
      --dist-prefill-window "$win" >/dev/null 2>"$tmp/two.err"
    runs[w$win]+=" $(rate "$tmp/two.err")"
  done
  echo "rep $i: one process ${runs[one]##* } t/s; 2 stages window $window ${runs[w$window]##* } t/s$( ((i == 1)) && echo "; window 1 ${runs[w1]} t/s")"
done
python3 - "${runs[one]}" "${runs[w$window]}" "${runs[w1]}" "$window" <<'PY'
import statistics as st, sys
one, win, w1 = ([float(x) for x in a.split()] for a in sys.argv[1:4])
for name, v in (("one process, 1 core", one), (f"2 stages, 2 cores, window {sys.argv[4]}", win), ("2 stages, 2 cores, window 1", w1)):
    print(f"{name}: prefill t/s min {min(v):.2f} median {st.median(v):.2f} ({' '.join(f'{x:.2f}' for x in v)})")
print(f"speedup (median): window {sys.argv[4]} {st.median(win) / st.median(one):.3f}x, window 1 {st.median(w1) / st.median(one):.3f}x")
PY
