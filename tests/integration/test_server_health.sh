#!/usr/bin/env bash
# GET /health across ds4-server's start: the listener comes up before the
# model loads, so a client polling from the start sees 503
# {"status":"loading"} (and 503 errors in each API's shape from the other
# endpoints, ds4_model_loaded 0 on /metrics) until the model is ready, then
# 200 {"status":"ok"} and requests served. The load is made long enough to
# watch with a real one: a 0.8 GB one-layer Qwen3-30B-A3B-shaped q4_k_m
# file read whole by --check-tensors (seconds on CI). Also: SIGTERM during
# the load exits 0 once it ends, and a port already in use fails at once
# (exit 1, one line) before any load.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"  # tmp, cleanup, free_port, stop_server

"$bin/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 1 --seed "$seed" \
    --out "$tmp/m.gguf" >/dev/null
key=k$RANDOM
H=(-H "x-api-key: $key" -H "Content-Type: application/json")
code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
start() {  # not start_server: this one returns at the first answer, 503 while loading
  # The load also waits 2 s (a test hook): on a fast machine the check alone
  # can end before the first requests below.
  DS4_TEST_LOAD_DELAY_MS=2000 "$bin/ds4-server" -m "$tmp/m.gguf" --backend cpu -t 2 --check-tensors --parallel 1 \
      --ctx 256 --port "$port" --api-key "$key" >"$tmp/log" 2>&1 &
  pid=$!
  # The first answer: the listener is up, the model still loading.
  for _ in $(seq 400); do
    c=$(code "$base/health") || true
    [ "$c" != 000 ] && return 0
    kill -0 "$pid" 2>/dev/null || fail "the server exited at start"
    sleep 0.01
  done
  fail "no answer on $base"
}

start
[ "$c" = 503 ] || fail "the first /health answered $c, not 503, while the model loads"
[ "$(cat "$tmp/body")" = '{"status":"loading"}' ] || fail "loading body: $(cat "$tmp/body")"
chat='{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":0}'
msg='{"max_tokens":3,"messages":[{"role":"user","content":"Hi"}]}'
[ "$(code "${H[@]}" "$base/v1/chat/completions" -d "$chat")" = 503 ] || fail "chat while loading: $(cat "$tmp/body")"
python3 -c "import json; d=json.load(open('$tmp/body')); assert 'loading' in d['error']['message']" \
  || fail "OpenAI 503 body: $(cat "$tmp/body")"
[ "$(code "${H[@]}" "$base/v1/messages" -d "$msg")" = 503 ] || fail "messages while loading: $(cat "$tmp/body")"
python3 -c "import json; d=json.load(open('$tmp/body')); assert d['type']=='error' and d['error']['type']=='overloaded_error'" \
  || fail "Anthropic 503 body: $(cat "$tmp/body")"
[ "$(code "${H[@]}" "$base/metrics")" = 200 ] && grep -q '^ds4_model_loaded 0$' "$tmp/body" \
  || fail "metrics while loading: $(cat "$tmp/body")"
[ "$(code "$base/v1/models")" = 401 ] || fail "the API key is not checked while loading"
grep -q "listening on" "$tmp/log" && fail "'listening' logged before the model loaded"
loading=1
for _ in $(seq 3600); do  # up to 3 minutes: ASan builds load slowly
  c=$(code "$base/health")
  [ "$c" = 200 ] && break
  [ "$c" = 503 ] || fail "/health answered $c while loading"
  loading=$((loading + 1))
  sleep 0.05
done
[ "$c" = 200 ] && [ "$(cat "$tmp/body")" = '{"status":"ok"}' ] || fail "never ready: $c $(cat "$tmp/body")"
echo "health: $loading answers of 503 loading, then 200"
grep -q "check-tensors: .* every value finite" "$tmp/log" || fail "the tensors were not checked before ready"
[ "$(code "${H[@]}" "$base/v1/chat/completions" -d "$chat")" = 200 ] || fail "chat once ready: $(cat "$tmp/body")"
[ "$(code "${H[@]}" "$base/metrics")" = 200 ] && grep -q '^ds4_model_loaded 1$' "$tmp/body" || fail "metrics once ready"
for _ in 1 2 3; do [ "$(code "$base/health")" = 200 ] || fail "/health went back to $c"; done
stop_server

# SIGTERM while loading: the load ends, nothing is served, exit 0.
start
[ "$c" = 503 ] || fail "second start: /health answered $c"
stop_server  # exit 0 after SIGTERM during the load
grep -q "stopped" "$tmp/log" || fail "no 'stopped' line after SIGTERM during the load"

# A port in use: one line, exit 1, before the (long) load.
python3 - "$bin/ds4-server" "$tmp/m.gguf" <<'PY' || fail "port in use"
import socket, subprocess, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
t0 = time.time()
r = subprocess.run([sys.argv[1], "-m", sys.argv[2], "--backend", "cpu", "--check-tensors",
                    "--port", str(s.getsockname()[1])], capture_output=True, text=True, timeout=120)
lines = r.stderr.strip().split("\n")
assert r.returncode == 1 and len(lines) == 1 and "cannot listen" in lines[0], (r.returncode, r.stderr)
assert "check-tensors" not in r.stderr, r.stderr
PY
echo "server health: ok"
