#!/usr/bin/env bash
# ds4-server as a pipeline coordinator (--role coordinator --layers 0:B
# --listen): two concurrent greedy chats through a 2-stage route (a
# `ds4 --role worker` process on loopback) give the texts one process gives;
# /health is 503 until the route is whole; a dead worker makes the next
# request a 503 with the sentence while the server keeps serving, and once a
# worker is back the same conversation (its prefix reused from the slot, so
# the new worker must be replayed) gives the same text again; /metrics
# carries per-hop series (hop 0 the coordinator, hop 1 the worker by address
# and layers) that move with each request; with the head on the coordinator
# server (--layers 0:CUT,output) and a blocks-only last worker, the same texts.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
seed=${DS4_TEST_SEED:-$RANDOM}
fail() { echo "FAIL (seed $seed): $*" >&2; for f in "$tmp"/*.log; do echo "== $f" >&2; tail -5 "$f" >&2; done; exit 1; }
source "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"  # free_port: outside the ephemeral range

# Qwen3-MoE and GLM-5 (DS4_ROUTE_ARCH picks one); the coordinator runs
# blocks 0..cut, the worker from cut + 1 (GLM-5's tiny model: block 2 reuses
# block 1's lightning indexer, so its cut is after block 2).
if [ -z "${DS4_ROUTE_ARCH:-}" ]; then
  for a in qwen3moe glm-dsa; do DS4_TEST_SEED=$seed DS4_ROUTE_ARCH=$a bash "$0" || exit 1; done
  exit 0
fi
arch=$DS4_ROUTE_ARCH
case $arch in qwen3moe) cut=1 ;; glm-dsa) cut=2 ;; *) fail "no cut for $arch" ;; esac
next=$((cut + 1))
m=$tmp/m.gguf
"$bin/ds4-gguf" synth --arch "$arch" --preset tiny --seed "$seed" --out "$m" >/dev/null
body() { printf '{"messages":[{"role":"user","content":"%s"}],"max_tokens":24,"temperature":0}' "$1"; }
ask() {  # BASE PROMPT OUT: writes the HTTP code to OUT.code, the body to OUT
  curl -s -o "$3" -w '%{http_code}' -H 'Content-Type: application/json' "$1/v1/chat/completions" -d "$(body "$2")" >"$3.code"
}
text() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['choices'][0]['message']['content'])" "$1"; }
wait_health() {  # BASE PID
  for _ in $(seq 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health")" = 200 ] && return 0
    kill -0 "$2" 2>/dev/null || fail "the server exited"
    sleep 0.1
  done
  fail "server at $1 never became healthy"
}
p1="Name three rivers"; p2="Count to ten please"

# One process.
port=$(free_port); base=http://127.0.0.1:$port
"$bin/ds4-server" -m "$m" --backend cpu -t 1 --parallel 2 --ctx 512 --port "$port" >"$tmp/single.log" 2>&1 &
s=$!; pids+=("$s")
wait_health "$base" "$s"
ask "$base" "$p1" "$tmp/a1" & q1=$!; ask "$base" "$p2" "$tmp/a2" & q2=$!; wait "$q1" "$q2"
[ "$(cat "$tmp/a1.code")" = 200 ] && [ "$(cat "$tmp/a2.code")" = 200 ] || fail "single server: $(cat "$tmp/a1") $(cat "$tmp/a2")"
kill "$s"; wait "$s" || true

# Coordinator server + one worker.
port=$(free_port); base=http://127.0.0.1:$port; pport=$(free_port)
"$bin/ds4-server" -m "$m" --backend cpu -t 1 --parallel 2 --ctx 512 --port "$port" --role coordinator --layers "0:$cut" \
  --listen 127.0.0.1 "$pport" >"$tmp/coord.log" 2>&1 &
c=$!; pids+=("$c")
h=000
for _ in $(seq 300); do  # the listener comes up first; the route stays incomplete without a worker
  h=$(curl -s -o /dev/null -w '%{http_code}' "$base/health") || true
  [ "$h" != 000 ] && break
  sleep 0.1
done
[ "$h" = 503 ] || fail "/health answered $h, not 503, while the route is incomplete"
"$bin/ds4" -m "$m" --role worker --layers "$next:output" --coordinator 127.0.0.1 "$pport" --ctx 512 -t 1 >"$tmp/w.log" 2>&1 &
w=$!; pids+=("$w")
wait_health "$base" "$c"
ask "$base" "$p1" "$tmp/b1" & q1=$!; ask "$base" "$p2" "$tmp/b2" & q2=$!; wait "$q1" "$q2"
[ "$(cat "$tmp/b1.code")" = 200 ] && [ "$(cat "$tmp/b2.code")" = 200 ] || fail "through the route: $(cat "$tmp/b1") $(cat "$tmp/b2")"
[ "$(text "$tmp/a1")" = "$(text "$tmp/b1")" ] || fail "text 1 differs: '$(text "$tmp/a1")' vs '$(text "$tmp/b1")'"
[ "$(text "$tmp/a2")" = "$(text "$tmp/b2")" ] || fail "text 2 differs: '$(text "$tmp/a2")' vs '$(text "$tmp/b2")'"
grep -q "^pipeline: route -> " "$tmp/coord.log" || fail "no route line"

# Per-hop telemetry in /metrics: hop 0 (the coordinator) and hop 1 (the
# worker, by address and layers) exist, and move with the next request.
waddr=$(sed -n 's/^pipeline: worker serving .* on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$tmp/w.log" | head -1)
[ -n "$waddr" ] || fail "no worker address in its log"
curl -s "$base/metrics" >"$tmp/m1.txt"
ask "$base" "$p2 again" "$tmp/b3"
[ "$(cat "$tmp/b3.code")" = 200 ] || fail "third request: $(cat "$tmp/b3")"
curl -s "$base/metrics" >"$tmp/m2.txt"
python3 - "$tmp/m1.txt" "$tmp/m2.txt" "$waddr" "$next" <<'PY' || fail "per-hop metrics: $(grep ds4_pipeline "$tmp/m2.txt" | head -30)"
import re, sys
def series(path):
    out = {}
    for l in open(path):
        m = re.match(r'(ds4_pipeline_hop_\w+)\{hop="(\d)",address="([^"]*)",layers="([^"]*)"(?:,le="([^"]*)")?\} (\S+)$', l.strip())
        if m:
            out[(m[1], m[2], m[3], m[4], m[5])] = float(m[6])
    return out
a, b, waddr = series(sys.argv[1]), series(sys.argv[2]), sys.argv[3]
def get(s, name, hop, le=None):
    v = [x for k, x in s.items() if k[0] == name and k[1] == hop and k[4] == le]
    assert len(v) == 1, (name, hop, v)
    return v[0]
workers = {k[2:4] for k in b if k[1] == "1"}
assert len(workers) == 1, workers
w = next(iter(workers))
assert w[0] == waddr and re.fullmatch(r"blocks? " + sys.argv[4] + r"(\.\.\d+)? \+ head", w[1]), w
assert any(k[1] == "0" and k[2] == "coordinator" and k[3].startswith("block") for k in b), "no hop 0"
for name in ("ds4_pipeline_hop_steps_total", "ds4_pipeline_hop_tokens_total", "ds4_pipeline_hop_bytes_in_total",
             "ds4_pipeline_hop_bytes_out_total", "ds4_pipeline_hop_eval_seconds_count",
             "ds4_pipeline_hop_downstream_wait_seconds_count", "ds4_pipeline_hop_send_seconds_count"):
    for hop in ("0", "1"):
        assert get(b, name, hop) > get(a, name, hop) > 0, (name, hop, get(a, name, hop), get(b, name, hop))
for hop in ("0", "1"):
    assert get(b, "ds4_pipeline_hop_eval_seconds_bucket", hop, "+Inf") == get(b, "ds4_pipeline_hop_eval_seconds_count", hop)
    assert get(b, "ds4_pipeline_hop_eval_seconds_sum", hop) > 0
assert get(b, "ds4_pipeline_hop_downstream_wait_seconds_sum", "0") > 0  # the coordinator waits for the worker
# The logits stay on the worker that applies the head: it answers each
# sequence's step with its sampler's candidate tokens (a few bytes), not
# a row of n_vocab floats (the tiny model's 151,936 are 608 KB).
steps = get(b, "ds4_pipeline_hop_steps_total", "0") - get(a, "ds4_pipeline_hop_steps_total", "0")
back = get(b, "ds4_pipeline_hop_bytes_in_total", "0") - get(a, "ds4_pipeline_hop_bytes_in_total", "0")
assert 0 < back / steps < 4096, ("bytes back per step", back, steps)
print("per-hop metrics move:", {h: get(b, "ds4_pipeline_hop_steps_total", h) for h in ("0", "1")})
PY

# The worker dies: 503 with the sentence; the server stays up.
kill -9 "$w"; wait "$w" 2>/dev/null || true
ask "$base" "$p1" "$tmp/c1"
[ "$(cat "$tmp/c1.code")" = 503 ] || fail "request through a dead worker: $(cat "$tmp/c1.code") $(cat "$tmp/c1")"
python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['error']['message']; assert 'did not answer' in m or 'incomplete' in m, m" \
  "$tmp/c1" || fail "503 body: $(cat "$tmp/c1")"
kill -0 "$c" || fail "the coordinator server died with its worker"

# A new worker: the same conversation again, exact (replayed onto the new worker).
"$bin/ds4" -m "$m" --role worker --layers "$next:output" --coordinator 127.0.0.1 "$pport" --ctx 512 -t 1 >"$tmp/w2.log" 2>&1 &
w=$!; pids+=("$w")
for _ in $(seq 100); do grep -q "registered with" "$tmp/w2.log" && break; sleep 0.1; done
sleep 1.5  # the coordinator's table drops or replaces the dead entry
ask "$base" "$p1" "$tmp/d1"
[ "$(cat "$tmp/d1.code")" = 200 ] || fail "after the worker came back: $(cat "$tmp/d1.code") $(cat "$tmp/d1")"
[ "$(text "$tmp/a1")" = "$(text "$tmp/d1")" ] || fail "text after restart differs: '$(text "$tmp/a1")' vs '$(text "$tmp/d1")'"
grep -q "holds 0 positions of sequence slot .*Replaying" "$tmp/coord.log" \
  || fail "the reused prefix was not replayed onto the new worker: $(grep -i replay "$tmp/coord.log")"
kill "$w" "$c"; wait "$w" "$c" 2>/dev/null || true

# The head on the coordinator server (--layers 0:CUT,output), blocks only on
# the worker (2:LAST), which returns its final hidden state: the same texts.
nl=$("$bin/ds4-gguf" inspect "$m" | sed -n "s/^  $arch.block_count *u32 *\([0-9]*\)$/\1/p")
nextn=$("$bin/ds4-gguf" inspect "$m" | sed -n "s/^  $arch.nextn_predict_layers *u32 *\([0-9]*\)$/\1/p")
nl=$((nl - ${nextn:-0}))  # GLM-5's MTP block is no stage's
port=$(free_port); base=http://127.0.0.1:$port; pport=$(free_port)
"$bin/ds4-server" -m "$m" --backend cpu -t 1 --parallel 2 --ctx 512 --port "$port" --role coordinator \
  --layers "0:$cut,output" --listen 127.0.0.1 "$pport" >"$tmp/coord-head.log" 2>&1 &
c=$!; pids+=("$c")
"$bin/ds4" -m "$m" --role worker --layers "$next:$((nl - 1))" --coordinator 127.0.0.1 "$pport" --ctx 512 -t 1 >"$tmp/w3.log" 2>&1 &
w=$!; pids+=("$w")
wait_health "$base" "$c"
ask "$base" "$p1" "$tmp/e1" & q1=$!; ask "$base" "$p2" "$tmp/e2" & q2=$!; wait "$q1" "$q2"
[ "$(cat "$tmp/e1.code")" = 200 ] && [ "$(cat "$tmp/e2.code")" = 200 ] || fail "head on the coordinator: $(cat "$tmp/e1") $(cat "$tmp/e2")"
[ "$(text "$tmp/a1")" = "$(text "$tmp/e1")" ] || fail "head on the coordinator, text 1 differs: '$(text "$tmp/a1")' vs '$(text "$tmp/e1")'"
[ "$(text "$tmp/a2")" = "$(text "$tmp/e2")" ] || fail "head on the coordinator, text 2 differs: '$(text "$tmp/a2")' vs '$(text "$tmp/e2")'"
echo "server pipeline: all checks passed (seed $seed)"
