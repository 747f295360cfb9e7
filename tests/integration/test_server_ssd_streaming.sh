#!/usr/bin/env bash
# ds4-server with --ssd-streaming at a one-expert cache: greedy replies to
# concurrent requests equal a resident server's (the batched steps overflow
# the cache and read whole blocks); /metrics carries the expert cache's
# counters; a failed expert read (the test hook) fails that request with
# HTTP 500 and one sentence, and the server keeps serving the same replies
# as before (no wrong token after a failure); with expert windows the
# replies are the same too.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"
"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
start() { start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 2 --ctx 256 "$@"; }
ask() {  # n -> prints the greedy text of prompt n
  curl -s "$base/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about tide number $1.\"}],\"max_tokens\":12,\"temperature\":0}" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["choices"][0]["message"]["content"] if "choices" in d else "ERROR " + json.dumps(d))'
}
both() { ask 1 >"$tmp/$1.1" & local first=$!; ask 2 >"$tmp/$1.2"; wait "$first"; }

start
both resident
stop_server

# The hook fails the 3rd expert read: the first request's prefill.
# (the lookahead off: a read ahead that fails fails no request, the step reads for itself)
DS4_TEST_FAIL_READ=3 start --ssd-streaming --ssd-streaming-cache-experts 1 --ssd-streaming-lookahead off
grep -q "^experts: cache of 1 slots" "$tmp/log" || fail "no cache line at start"
code=$(curl -s -o "$tmp/failed.json" -w '%{http_code}' "$base/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"Tell me about tide number 1."}],"max_tokens":12,"temperature":0}')
[ "$code" = 500 ] || fail "a failed expert read answered $code: $(cat "$tmp/failed.json")"
grep -q "Input/output error" "$tmp/failed.json" || fail "the error body does not say why: $(cat "$tmp/failed.json")"
both streamed
for i in 1 2; do
  cmp -s "$tmp/resident.$i" "$tmp/streamed.$i" \
    || fail "request $i: '$(cat "$tmp/streamed.$i")' with streaming, '$(cat "$tmp/resident.$i")' resident (seed $seed)"
done
grep -q "^ERROR" "$tmp/resident.1" && fail "the resident server failed: $(cat "$tmp/resident.1")"
# Each request's log line gives the expert cache over the steps it took part in.
grep -q "^request [0-9]* POST /v1/chat/completions 200: .*; experts meanwhile: [1-9][0-9]* lookups, [0-9.]*% hits, [0-9]* full-layer reads, [0-9.]* MiB read, steps waited [0-9.]* s$" "$tmp/log" \
  || fail "no expert cache figures in the request log: $(grep '^request' "$tmp/log")"
curl -s "$base/metrics" >"$tmp/metrics"
python3 - "$tmp/metrics" <<'PY' || fail "expert cache series missing or idle"
import sys
v = {l.split()[0]: float(l.split()[1]) for l in open(sys.argv[1]) if l.startswith("ds4_expert_cache_")}
assert v["ds4_expert_cache_misses_total"] > 0 and v["ds4_expert_cache_read_bytes_total"] > 0, v
assert v["ds4_expert_cache_hits_total"] <= v["ds4_expert_cache_lookups_total"], v
PY
stop_server

# Expert windows (every expert in RAM, two promotable): the same replies from
# batched steps whose experts are promoted and demoted between them, and
# /metrics counting the promotions.
start --ssd-streaming --ssd-streaming-windows on --ssd-streaming-cache-experts 2
grep -q "^experts: [0-9]* windows of .* 2 device slots" "$tmp/log" || fail "no windows line at start: $(head -20 "$tmp/log")"
both windows
for i in 1 2; do
  cmp -s "$tmp/resident.$i" "$tmp/windows.$i" \
    || fail "request $i: '$(cat "$tmp/windows.$i")' with windows, '$(cat "$tmp/resident.$i")' resident (seed $seed)"
done
curl -s "$base/metrics" >"$tmp/metrics"
python3 - "$tmp/metrics" <<'PY' || fail "expert windows series missing or idle"
import sys
v = {l.split()[0]: float(l.split()[1]) for l in open(sys.argv[1]) if l.startswith("ds4_expert_cache_")}
assert v["ds4_expert_cache_promotions_total"] > 0 and v["ds4_expert_cache_lookups_total"] > 0, v
assert v["ds4_expert_cache_hits_total"] + v["ds4_expert_cache_misses_total"] == v["ds4_expert_cache_lookups_total"], v
PY
stop_server
echo "ok: ds4-server --ssd-streaming replies (expert cache and expert windows) equal the resident server's, a failed read is HTTP 500 (seed $seed)"
