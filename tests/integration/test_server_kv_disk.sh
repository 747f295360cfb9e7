#!/usr/bin/env bash
# The disk KV cache (--kv-disk-dir) across real restarts of ds4-server, both
# families, a fresh random model and prompt each run:
#   - a prompt's snapshot is written; SIGTERM exits 0 with it on disk;
#   - the restarted server resumes that prefix: the usage reports it as
#     cached tokens, /metrics counts a disk hit, and the text equals a server
#     without any cache (temperature 0);
#   - a truncated file is ignored with one warning, never loaded; the text
#     is still the same;
#   - SIGKILL while snapshots are being written leaves nothing that loads
#     wrongly: the next server gives the same text again;
#   - flags are checked before the load.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
seed=$RANDOM
fail() { echo "FAIL (seed $seed): $*" >&2; [ -f "$tmp/log" ] && tail -20 "$tmp/log" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port

# start_server MODEL LOG [flags...]: sets $pid once /health says 200.
start_server() {
  local m=$1 log=$2; shift 2
  "$bin/ds4-server" -m "$m" --backend cpu -t 2 --parallel 1 --ctx 1024 --port "$port" "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] && return 0
    kill -0 "$pid" 2>/dev/null || fail "the server exited at start: $(cat "$log")"
    sleep 0.1
  done
  fail "the server did not become ready"
}
stop_server() {  # SIGTERM; the exit status must be 0
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  pid=
  [ "$rc" = 0 ] || fail "SIGTERM: exit $rc"
}
# complete PROMPT_FILE OUT: a greedy completion of the prompt's text.
complete() {
  python3 - "$1" >"$tmp/body.json" <<'PY'
import json, sys
print(json.dumps({"prompt": open(sys.argv[1]).read(), "max_tokens": 12, "temperature": 0}))
PY
  curl -s -H "Content-Type: application/json" "$base/v1/completions" -d @"$tmp/body.json" >"$2"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["choices"][0]["text"]' "$2" 2>/dev/null \
    || fail "no completion: $(cat "$2")"
}
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
metric() { curl -s "$base/metrics" | sed -n "s/^$1 \\([0-9.e+]*\\)$/\\1/p"; }

# Usage errors, before any model is read.
for bad in "--kv-disk-space-mb 5" "--kv-disk-compression lz4" "--kv-disk-dir $tmp/x --kv-disk-compression gzip" \
           "--kv-disk-dir $tmp/x --kv-disk-space-mb 0"; do
  rc=0; "$bin/ds4-server" -m /nonexistent $bad 2>"$tmp/err" || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || fail "ds4-server $bad: exit $rc: $(cat "$tmp/err")"
done
touch "$tmp/plain"
rc=0; "$bin/ds4-server" -m /nonexistent --kv-disk-dir "$tmp/plain" 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "not a directory" "$tmp/err" || fail "a file as --kv-disk-dir: exit $rc: $(cat "$tmp/err")"

for arch in qwen3moe deepseek4; do
  m=$tmp/$arch.gguf
  "$bin/ds4-gguf" synth --arch "$arch" --preset tiny --seed "$seed" --out "$m" >/dev/null
  dir=$tmp/kv-$arch
  # A prompt of a few hundred tokens ending in a newline (the next prompt's
  # text starts a new pre-token there, so its tokens extend these).
  python3 - "$seed" >"$tmp/p1.txt" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
words = "wave shell tide reef sand gull kelp foam drift salt stone crab light harbor".split()
print(" ".join(r.choice(words) for _ in range(150 + r.randrange(100))))
PY
  { cat "$tmp/p1.txt"; echo "And then the sea said"; } >"$tmp/p2.txt"

  # The reference: a server with no cache at all.
  start_server "$m" "$tmp/log"
  complete "$tmp/p2.txt" "$tmp/ref.json"
  stop_server

  codec=$([ $((RANDOM % 2)) = 0 ] && echo zstd || echo lz4)
  start_server "$m" "$tmp/log" --kv-disk-dir "$dir" --kv-disk-space-mb 256 --kv-disk-compression "$codec"
  grep -q "^ds4-server: KV cache on disk in $dir: 0 snapshots, 0 of 256 MiB ($codec)" "$tmp/log" \
    || fail "$arch: no startup line: $(cat "$tmp/log")"
  complete "$tmp/p1.txt" "$tmp/a.json"
  n1=$(field "$tmp/a.json" 'r["usage"]["prompt_tokens"]')
  stop_server
  files=$(find "$dir" -name '*.ds4kv' ! -name '.tmp-*' | wc -l)
  [ "$files" -ge 1 ] || fail "$arch: no snapshot file after SIGTERM"

  start_server "$m" "$tmp/log" --kv-disk-dir "$dir" --kv-disk-space-mb 256
  grep -q "KV cache on disk in $dir: $files snapshots" "$tmp/log" || fail "$arch: restart line: $(cat "$tmp/log")"
  complete "$tmp/p2.txt" "$tmp/b.json"
  cached=$(field "$tmp/b.json" 'r["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)')
  [ "$cached" = "$n1" ] || fail "$arch: the restarted server reused $cached tokens, the stored prompt had $n1"
  [ "$(field "$tmp/b.json" 'r["choices"][0]["text"]')" = "$(field "$tmp/ref.json" 'r["choices"][0]["text"]')" ] \
    || fail "$arch: the text after a disk hit differs from a server without cache"
  [ "$(metric 'ds4_prefix_cache_hits_total{source="disk"}')" = 1 ] || fail "$arch: /metrics counts no disk hit"
  [ "$(metric ds4_kv_disk_read_bytes_total)" -gt 0 ] || fail "$arch: /metrics counts no bytes read"
  stop_server

  # A truncated snapshot: one warning, never loaded.
  f=$(find "$dir" -name '*.ds4kv' ! -name '.tmp-*' | head -1)
  truncate -s $(( $(stat -c %s "$f") * (20 + RANDOM % 70) / 100 )) "$f"
  start_server "$m" "$tmp/log" --kv-disk-dir "$dir"
  [ "$(grep -c "warning: KV cache: ignoring $f: .* is truncated" "$tmp/log")" = 1 ] \
    || fail "$arch: no single warning for a truncated file: $(cat "$tmp/log")"
  complete "$tmp/p2.txt" "$tmp/c.json"
  [ "$(field "$tmp/c.json" 'r["choices"][0]["text"]')" = "$(field "$tmp/ref.json" 'r["choices"][0]["text"]')" ] \
    || fail "$arch: the text with a truncated cache file differs"

  # SIGKILL while writes may be in flight (several prompts, then kill at
  # once): the next server loads only whole files and gives the same text.
  for i in 1 2 3; do { cat "$tmp/p1.txt"; echo "variant $i $RANDOM"; } >"$tmp/v$i.txt"; complete "$tmp/v$i.txt" "$tmp/v.json"; done
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=
  start_server "$m" "$tmp/log" --kv-disk-dir "$dir"
  complete "$tmp/p2.txt" "$tmp/d.json"
  [ "$(field "$tmp/d.json" 'r["choices"][0]["text"]')" = "$(field "$tmp/ref.json" 'r["choices"][0]["text"]')" ] \
    || fail "$arch: the text after a SIGKILL during writes differs"
  [ "$(metric 'ds4_kv_disk_failures_total{op="load"}')" = 0 ] || fail "$arch: a file that loaded badly"
  stop_server
  [ -z "$(find "$dir" -name '.tmp-*')" ] || fail "$arch: temporary files left after a clean stop"
done
echo "ok: the disk KV cache resumes prefixes across restarts (seed $seed)"
