#!/usr/bin/env bash
# Routing traces end to end: a run's --ssd-streaming-trace-out FILE, replayed
# by ds4-trace replay at the run's own budget and prefill strategy, gives
# exactly the lookups, hits, misses, scratch loads and evictions the run's
# cache line reported (both families, budget, chunk and strategy drawn each
# run; ds4 and ds4-bench); ds4-trace gen writes traces replay reads; a
# damaged trace is one sentence and exit 1; bad command lines exit 2.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/seed.sh"  # seed (DS4_TEST_SEED), RANDOM seeded with it

ids() { python3 -c "import random; r=random.Random($seed); print(' '.join(str(r.randrange($2)) for _ in range($1)))"; }

# "lookups hits misses scratch evictions" from a cache line.
counts_of_line() {
  sed -n 's/.*experts: \([0-9]*\) lookups, \([0-9]*\) hits ([^)]*), \([0-9]*\) misses ([0-9]* from the host tier, \([0-9]*\) to scratch, \([0-9]*\) evictions;.*/\1 \2 \3 \4 \5/p' | tail -1
}
counts_of_json() {
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['lookups'], j['hits'], j['misses'], j['scratch_loads'], j['evictions'])" "$1"
}

for arch in qwen3moe deepseek4 glm-dsa; do
  m=$tmp/$arch.gguf
  "$bin/ds4-gguf" synth --arch "$arch" --preset tiny --no-tokenizer --seed "$seed" --out "$m" >/dev/null
  v=$("$bin/ds4-gguf" inspect "$m" | sed -n "s/^  $arch.vocab_size *u32 *\([0-9]*\)$/\1/p")
  ids $((60 + RANDOM % 100)) "$v" >"$tmp/ids.txt"
  # One run per family (CI time): budget, chunk and strategy drawn fresh.
  for run in 1; do
    chunk=$(shuf -n1 -e 1 32 600)
    strategy=$(shuf -n1 -e auto per-expert full-layer)
    budget=$((1 + RANDOM % 24))
    "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/l.bin" -t 2 --prefill-chunk "$chunk" \
      --ssd-streaming --ssd-streaming-cache-experts "$budget" --ssd-streaming-prefill "$strategy" \
      --ssd-streaming-trace-out "$tmp/run.trace" 2>"$tmp/err" || fail "$arch: ds4 failed (seed $seed): $(cat "$tmp/err")"
    total=$(sed -n 's/.*; \([0-9]*\) routed experts of .*/\1/p' "$tmp/err")
    want=$(counts_of_line <"$tmp/err")
    [[ -n "$want" ]] || fail "$arch: no cache line: $(cat "$tmp/err")"
    "$bin/ds4-trace" replay "$tmp/run.trace" --device-experts "$budget" --prefill "$strategy" --json "$tmp/r.json" \
      >"$tmp/line" || fail "$arch: replay failed"
    got=$(counts_of_json "$tmp/r.json")
    [[ "$got" == "$want" ]] || fail "$arch (seed $seed, budget $budget, chunk $chunk, $strategy): the run counted $want, its replay $got"
    grep -q "^replay: [0-9]* tokens, $total experts; device " "$tmp/line" || fail "$arch: replay line: $(cat "$tmp/line")"
  done
done

# ds4-bench records the same way (its walk: prefill, then generation probes).
m=$tmp/qwen3moe.gguf
budget=$((1 + RANDOM % 16))
"$bin/ds4-bench" -m "$m" --ctx-start 64 --ctx-max 128 --step-incr 64 --gen-tokens 4 -t 2 --ssd-streaming \
  --ssd-streaming-cache-experts "$budget" --ssd-streaming-trace-out "$tmp/bench.trace" >/dev/null 2>"$tmp/err" \
  || fail "ds4-bench failed: $(cat "$tmp/err")"
want=$(counts_of_line <"$tmp/err")
"$bin/ds4-trace" replay "$tmp/bench.trace" --device-experts "$budget" --json "$tmp/r.json" >/dev/null
[[ "$(counts_of_json "$tmp/r.json")" == "$want" ]] || fail "ds4-bench (seed $seed, budget $budget): the run counted $want, its replay $(counts_of_json "$tmp/r.json")"

# Damage: cut short, an id out of range, another file: exit 1, one line.
t=$tmp/run.trace
head -c $(( $(stat -c %s "$t") * (1 + RANDOM % 99) / 100 )) "$t" >"$tmp/cut.trace"
sed '0,/^route \([0-9]*\) \([0-9]*\) [0-9]*/s//route \1 \2 99999/' "$t" >"$tmp/range.trace"
for bad in "$tmp/cut.trace" "$tmp/range.trace" "$m" "$tmp/nothing"; do
  rc=0; "$bin/ds4-trace" replay "$bad" --device-experts 4 >/dev/null 2>"$tmp/err" || rc=$?
  [[ $rc == 1 ]] || fail "damaged trace $bad: exit $rc, not 1"
  [[ $(wc -l <"$tmp/err") == 1 ]] && grep -q "^ds4-trace: .*routing trace .*\.$" "$tmp/err" || fail "damaged trace $bad: $(cat "$tmp/err")"
done

# Generated traces: uniform and Zipf, replayed with a host tier and a price.
"$bin/ds4-trace" gen --blocks 3 --experts 16 --experts-per-token 2 --tokens 300 --zipf 1.1 --out "$tmp/z.trace" >/dev/null
"$bin/ds4-trace" gen --blocks 3 --experts 16 --experts-per-token 2 --tokens 300 --uniform --out "$tmp/u.trace" >/dev/null
for g in z u; do
  "$bin/ds4-trace" replay "$tmp/$g.trace" --device-fraction 0.5 --host-fraction 0.25 --bytes-per-expert 1048576 \
    --json "$tmp/$g.json" >"$tmp/line" || fail "replay of a generated trace failed"
  grep -q "device 24 slots (50.0%) + 2 scratch, host 12 slots" "$tmp/line" || fail "generated $g: $(cat "$tmp/line")"
done
python3 - "$tmp/z.json" "$tmp/u.json" <<'EOF' || fail "generated traces: Zipf should hit more than uniform"
import json, sys
z, u = (json.load(open(p)) for p in sys.argv[1:])
assert z["hit_rate"] > u["hit_rate"], (z["hit_rate"], u["hit_rate"])
assert z["disk_bytes_per_token"] == z["disk_reads_per_token"] * 1048576
EOF

# Bad command lines: exit 2 before anything is read or written.
usage() {
  local rc=0; "$bin/$1" "${@:2}" >/dev/null 2>"$tmp/err" || rc=$?
  [[ $rc == 2 ]] || fail "$* exited $rc, not 2: $(cat "$tmp/err")"
  [[ $(wc -l <"$tmp/err") == 1 ]] || fail "$*: not one line: $(cat "$tmp/err")"
}
usage ds4-trace
usage ds4-trace replay "$t"
usage ds4-trace replay "$t" --device-experts 0
usage ds4-trace replay "$t" --device-experts 2 --device-fraction 0.5
usage ds4-trace replay "$t" --device-fraction 1.5
usage ds4-trace replay "$t" --device-experts 2 --prefill sometimes
usage ds4-trace gen --blocks 2 --experts 4 --experts-per-token 5 --tokens 1 --uniform --out "$tmp/x"
usage ds4-trace gen --blocks 2 --experts 4 --experts-per-token 2 --tokens 1 --out "$tmp/x"
usage ds4-trace gen --blocks 2 --experts 4 --experts-per-token 2 --tokens 1 --zipf -1 --out "$tmp/x"
usage ds4 -m "$m" --ssd-streaming-trace-out "$tmp/x"
usage ds4 -m "$m" --ssd-streaming --ssd-streaming-trace-out "$tmp/no/such/dir/x"
usage ds4 -m "$m" --ssd-streaming --ssd-streaming-trace-out "$tmp"
[[ ! -e "$tmp/x" ]] || fail "a refused command line wrote a file"
echo "ok: routing traces replay to the run's own counts (seed $seed)"
