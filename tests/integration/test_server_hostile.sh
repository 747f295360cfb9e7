#!/usr/bin/env bash
# ds4-server against malformed and hostile clients on loopback: a tiny
# Qwen3-MoE, a real server process, raw sockets (server_hostile.py, one
# table of cases, each with its exact status and error shape or a closed
# connection: bad JSON, 100k-deep nesting, invalid UTF-8 and NUL bytes,
# wrong types for every field, a prompt longer than the context, huge
# max_tokens clamped, bodies over --max-body-mb however they are sent, keys
# on every endpoint (the Bearer scheme in any case), Range headers (ignored:
# never a 206), unknown paths and methods, broken request lines; with
# slow-loris clients and a stalled one alongside; then pipelining,
# HTTP/1.0 (streams unchunked, closed at the end), a half-closed request, a
# client that leaves mid-stream, whole replies whose client closes or
# half-closes (cancelled, slot freed), and hundreds of dropped
# connections). Before and after: the same greedy chat gives the same
# text, and the server is alive.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"

ctx=256
max_body_mb=1
"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
key=k$RANDOM$RANDOM
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 2 --ctx "$ctx" --api-key "$key" --cache-ram-mb 32 \
    --max-body-mb "$max_body_mb"

greedy() {
  curl -s -H "Authorization: Bearer $key" -H "Content-Type: application/json" "$base/v1/chat/completions" \
    -d '{"messages":[{"role":"user","content":"Tell me about the sea."}],"max_tokens":12,"temperature":0}' |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d["choices"][0]["message"]["content"]))'
}
before=$(greedy) || fail "the greedy chat before the hostile requests failed"

python3 "$src/tests/integration/server_hostile.py" "$port" "$key" "$pid" "$ctx" $((max_body_mb << 20)) \
  || fail "hostile requests (above: one line per case that failed)"

kill -0 "$pid" 2>/dev/null || fail "the server died"
# A second server on the same port: refused at once (httplib's SO_REUSEPORT
# let it bind and take half the connections).
rc=0; timeout 60 "$bin/ds4-server" -m "$tmp/m.gguf" --backend cpu --port "$port" 2>"$tmp/err" >/dev/null || rc=$?
[ "$rc" = 1 ] && grep -q "cannot listen" "$tmp/err" || fail "a second server on port $port: expected exit 1, cannot listen; got $rc: $(cat "$tmp/err")"
after=$(greedy) || fail "the greedy chat after the hostile requests failed"
[ "$after" = "$before" ] || fail "the greedy chat after the hostile requests says $after, before $before"
stop_server
echo "server hostile: ok (seed $seed)"
