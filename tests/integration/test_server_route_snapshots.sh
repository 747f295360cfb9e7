#!/usr/bin/env bash
# Snapshots across a pipeline route (ds4-server --role coordinator with
# --kv-disk-dir), 2 and 3 stages of a fresh tiny qwen3moe and deepseek4 on
# loopback:
#   - a third request sharing a long prefix with the first (a second one in
#     between took the only slot) restores the RAM snapshot on every stage:
#     every hop's /metrics tokens count grows by the new tokens only, and the
#     text equals a one-process server's;
#   - the whole route restarted: the gathered disk file is reused on every
#     stage (a disk hit, the same small token counts, the same text);
#   - workers restarted with another --layers split refuse their parts: the
#     coordinator replays with one warning and the text is still the same;
#   - a truncated gathered file is ignored with one warning.
set -euo pipefail
source "$(dirname "$0")/seed.sh"
# Both families, one run each under the same seed (DS4_ROUTE_ARCH picks one).
if [ -z "${DS4_ROUTE_ARCH:-}" ]; then
  for a in qwen3moe deepseek4; do DS4_TEST_SEED=$seed DS4_ROUTE_ARCH=$a bash "$0" || exit 1; done
  exit 0
fi
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL (seed $seed): $*" >&2; for f in "$tmp"/*.log; do echo "== $f" >&2; tail -5 "$f" >&2; done; exit 1; }
source "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"  # free_port: outside the ephemeral range
wait_health() {  # BASE PID
  for _ in $(seq 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health")" = 200 ] && return 0
    kill -0 "$2" 2>/dev/null || fail "the server exited"
    sleep 0.1
  done
  fail "server at $1 never became healthy"
}
m=$tmp/m.gguf
arch=$DS4_ROUTE_ARCH
"$bin/ds4-gguf" synth --arch "$arch" --preset tiny --seed "$seed" --out "$m" >/dev/null
# A long shared prefix, then short different tails.
prefix=$(python3 -c "import random; random.seed($seed); print(' '.join(random.choice(['river','stone','cloud','green','seven','tower','north']) for _ in range(150)))")
complete() {  # BASE PROMPT OUT
  python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 8, "temperature": 0}))' "$2" >"$tmp/body.json"
  curl -s -H 'Content-Type: application/json' "$1/v1/completions" -d @"$tmp/body.json" >"$3" \
    || fail "the request to $1 got no answer (curl exit $?)"
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))["choices"][0]["text"]' "$3" 2>/dev/null || fail "no completion: $(cat "$3")"
}
text() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['choices'][0]['text'])" "$1"; }
usage() { python3 -c "import json,sys; u=json.load(open(sys.argv[1]))['usage']; print(u['prompt_tokens'], (u.get('prompt_tokens_details') or {}).get('cached_tokens', 0), u['completion_tokens'])" "$1"; }
# hop_tokens BASE: "hop=tokens ..." of ds4_pipeline_hop_tokens_total.
hop_tokens() { curl -s "$1/metrics" | sed -n 's/^ds4_pipeline_hop_tokens_total{hop="\([0-9]\)".*} \([0-9.e+]*\)$/\1 \2/p'; }

# The reference: one process, no cache.
port=$(free_port); base=http://127.0.0.1:$port
"$bin/ds4-server" -m "$m" --backend cpu -t 1 --parallel 1 --ctx 1024 --port "$port" >"$tmp/single.log" 2>&1 &
s=$!; pids+=("$s"); wait_health "$base" "$s"
complete "$base" "$prefix alpha" "$tmp/ref"
kill "$s"; wait "$s" || true

coord_pid=; worker_pids=()
start_route() {  # COORD_LAYERS WORKER_LAYERS...: a coordinator server with --kv-disk-dir and its workers
  local cl=$1; shift
  port=$(free_port); base=http://127.0.0.1:$port; local pport; pport=$(free_port)
  "$bin/ds4-server" -m "$m" --backend cpu -t 1 --parallel 1 --ctx 1024 --port "$port" --role coordinator \
    --layers "$cl" --listen 127.0.0.1 "$pport" --kv-disk-dir "$tmp/kv" >>"$tmp/coord.log" 2>&1 &
  coord_pid=$!; pids+=("$coord_pid"); worker_pids=()
  local i=0
  for wl in "$@"; do
    "$bin/ds4" -m "$m" --role worker --layers "$wl" --coordinator 127.0.0.1 "$pport" --ctx 1024 -t 1 >>"$tmp/w$i.log" 2>&1 &
    worker_pids+=($!); pids+=($!); i=$((i + 1))
  done
  wait_health "$base" "$coord_pid"
}
stop_route() {
  kill -TERM "$coord_pid"; wait "$coord_pid" || true
  for p in "${worker_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
# reused BASE PROMPT OUT WHAT: the prompt's text equals the reference's and
# every hop evaluated only what the cache did not hold.
reused() {
  local before after
  before=$(hop_tokens "$1")
  complete "$1" "$2" "$3"
  after=$(hop_tokens "$1")
  [ "$(text "$3")" = "$(text "$tmp/ref")" ] || fail "$4: text '$(text "$3")', one process '$(text "$tmp/ref")'"
  python3 - "$before" "$after" $(usage "$3") "$4" <<'PY' || fail "$4: hop tokens $before -> $after, usage $(usage "$3")"
import sys
def parse(s):
    w = s.split()
    return {w[i]: float(w[i + 1]) for i in range(0, len(w), 2)}
b, a = parse(sys.argv[1]), parse(sys.argv[2])
prompt, cached, completion, what = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
assert cached >= 100, ("too little reused", cached)
new = prompt - cached + completion
for hop in a:
    d = a[hop] - b.get(hop, 0)
    assert 0 < d <= new, (hop, d, new)  # a replay would add the cached tokens again
print(what + ": every hop evaluated", {h: a[h] - b.get(h, 0) for h in a}, "of", prompt + completion, "tokens")
PY
}
warnings() { grep -c "$1" "$tmp/coord.log" || true; }

for layers in "0:1 2:output" "0:0 1:2 3:output"; do
  rm -rf "$tmp/kv"; : >"$tmp/coord.log"
  set -- $layers
  start_route "$@"
  complete "$base" "$prefix" "$tmp/x1"  # its prompt's snapshot: the whole route's
  complete "$base" "unrelated words here" "$tmp/x2"  # takes the slot
  reused "$base" "$prefix alpha" "$tmp/x3" "RAM, $# stages"
  stop_route
  n=$(ls "$tmp/kv"/*.ds4kv | wc -l); [ "$n" -ge 1 ] || fail "no snapshot file"
  start_route "$@"
  hits0=$(curl -s "$base/metrics" | sed -n 's/^ds4_prefix_cache_hits_total{source="disk"} //p')
  reused "$base" "$prefix alpha" "$tmp/x4" "disk after a restart, $# stages"
  hits1=$(curl -s "$base/metrics" | sed -n 's/^ds4_prefix_cache_hits_total{source="disk"} //p')
  [ "$hits1" -gt "$hits0" ] || fail "no disk hit ($hits0 -> $hits1)"
  [ "$(warnings Replaying)" = 0 ] || fail "a replay where the snapshot fits: $(grep Replaying "$tmp/coord.log")"
  stop_route
done

# The route changed since the files were written: the workers refuse their parts.
: >"$tmp/coord.log"
start_route 0:0 1:1 2:output
complete "$base" "$prefix alpha" "$tmp/x5"
[ "$(text "$tmp/x5")" = "$(text "$tmp/ref")" ] || fail "after a new split: '$(text "$tmp/x5")'"
[ "$(warnings Replaying)" = 1 ] && grep -q "KV snapshot's part was written by" "$tmp/coord.log" \
  || fail "no single refusal warning: $(grep -i warn "$tmp/coord.log")"
stop_route

# A truncated gathered file: ignored with one warning, the text the same.
for f in "$tmp/kv"/*.ds4kv; do truncate -s $(( $(stat -c %s "$f") / 2 )) "$f"; done
: >"$tmp/coord.log"
start_route 0:1 2:output
[ "$(grep -c "KV cache: ignoring" "$tmp/coord.log")" -ge 1 ] || fail "no warning for a truncated file"
complete "$base" "$prefix alpha" "$tmp/x6"
[ "$(text "$tmp/x6")" = "$(text "$tmp/ref")" ] || fail "after a truncated file: '$(text "$tmp/x6")'"
stop_route
echo "route snapshots: ok (seed $seed)"
