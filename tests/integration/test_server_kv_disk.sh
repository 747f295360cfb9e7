#!/usr/bin/env bash
# The disk KV cache (--kv-disk-dir) across real restarts of ds4-server, both
# families, a fresh random model and prompt each run:
#   - a prompt's snapshot is written; SIGTERM exits 0 with it on disk;
#   - the restarted server resumes that prefix: the usage reports it as
#     cached tokens, /metrics counts a disk hit, and the text equals a server
#     without any cache (temperature 0);
#   - a truncated file is ignored with one warning, never loaded; the text
#     is still the same;
#   - SIGKILL while a snapshot is being written (sent the moment its
#     temporary file appears, or at a random moment of a long prompt's
#     request), round after round: each restart starts, indexes every file
#     it finds (none torn) and removes the killed writes' temporary files,
#     and every prompt's text equals a server without any cache's;
#   - flags are checked before the load.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"

# start MODEL [flags...]: one slot of 1024 tokens, ready once /health says 200.
start() { local m=$1; shift; start_server -m "$m" --backend cpu -t 2 --parallel 1 --ctx 1024 "$@"; }
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
# kill_during_write PROMPT_FILE DIR write|random: sends the prompt's
# completion and SIGKILLs the server the moment a snapshot's temporary file
# appears in DIR (inotify), or at a random moment of the request; prints 1
# when a temporary file was there after the kill (the write was cut), else 0.
kill_during_write() {
  python3 - "$1" "$2" "$3" "$pid" "$port" <<'PY'
import ctypes, http.client, json, os, random, select, signal, sys, threading, time
prompt, d, mode, pid, port = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
libc = ctypes.CDLL("libc.so.6", use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
if fd < 0 or libc.inotify_add_watch(fd, d.encode(), 0x100) < 0:  # IN_CREATE
    print("inotify failed: errno %d" % ctypes.get_errno()); sys.exit(1)
def ask():
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": 200, "temperature": 0}),
                  {"Content-Type": "application/json"})
        c.getresponse().read()
    except Exception:
        pass  # the server was killed
threading.Thread(target=ask, daemon=True).start()
t0 = time.time()
deadline = t0 + (random.uniform(0.0, 1.0) if mode == "random" else 30)
while time.time() < deadline:
    r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.time()))
    if r and any(b".tmp-" in x for x in os.read(fd, 65536).split(b"\0")):
        break
os.kill(pid, signal.SIGKILL)
if mode == "write" and time.time() >= deadline:
    print("no snapshot write started within 30 s"); sys.exit(1)
print(1 if any(n.startswith(".tmp-") for n in os.listdir(d)) else 0)
PY
  local rc=$?
  wait "$pid" 2>/dev/null || true  # killed: its status is 137
  pid=
  return $rc
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

  # Long prompts of their own for the SIGKILL rounds (a snapshot each).
  for i in 1 2; do
    python3 - "$seed$i" >"$tmp/k$i.txt" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
print(" ".join(r.choice("moon star comet orbit dust ring nova void".split()) for _ in range(150 + r.randrange(100))))
PY
  done

  # The reference: a server with no cache at all.
  start "$m"
  complete "$tmp/p2.txt" "$tmp/ref.json"
  for i in 1 2; do complete "$tmp/k$i.txt" "$tmp/kref$i.json"; done
  stop_server

  codec=$([ $((RANDOM % 2)) = 0 ] && echo zstd || echo lz4)
  start "$m" --kv-disk-dir "$dir" --kv-disk-space-mb 256 --kv-disk-compression "$codec"
  grep -q "^ds4-server: KV cache on disk in $dir: 0 snapshots, 0 of 256 MiB ($codec)" "$tmp/log" \
    || fail "$arch: no startup line: $(cat "$tmp/log")"
  complete "$tmp/p1.txt" "$tmp/a.json"
  n1=$(field "$tmp/a.json" 'r["usage"]["prompt_tokens"]')
  stop_server
  files=$(find "$dir" -name '*.ds4kv' ! -name '.tmp-*' | wc -l)
  [ "$files" -ge 1 ] || fail "$arch: no snapshot file after SIGTERM"

  start "$m" --kv-disk-dir "$dir" --kv-disk-space-mb 256
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
  start "$m" --kv-disk-dir "$dir"
  [ "$(grep -c "warning: KV cache: ignoring $f: .* is truncated" "$tmp/log")" = 1 ] \
    || fail "$arch: no single warning for a truncated file: $(cat "$tmp/log")"
  complete "$tmp/p2.txt" "$tmp/c.json"
  [ "$(field "$tmp/c.json" 'r["choices"][0]["text"]')" = "$(field "$tmp/ref.json" 'r["choices"][0]["text"]')" ] \
    || fail "$arch: the text with a truncated cache file differs"

  stop_server
  rm "$f"  # the truncated file planted above; from here every file must be whole

  # SIGKILL while a snapshot is being written, round after round: round 1
  # kills the moment the write's temporary file appears, round 2 at a
  # random moment of the request. Each restart must start (warnings
  # allowed), remove the killed writes' temporary files and index every
  # snapshot file there is (a torn one would be ignored with a warning:
  # none may be); then each prompt's text is a server without cache's.
  landed=0
  for round in 1 2; do
    start "$m" --kv-disk-dir "$dir"
    files=$(find "$dir" -name '*.ds4kv' ! -name '.tmp-*' | wc -l)
    grep -q "KV cache on disk in $dir: $files snapshots" "$tmp/log" \
      || fail "$arch round $round: expected all $files snapshot files indexed: $(grep "KV cache" "$tmp/log")"
    [ -z "$(find "$dir" -name '.tmp-*')" ] || fail "$arch round $round: a killed write's temporary file was left"
    mode=$([ "$round" = 1 ] && echo write || echo random)
    kill_during_write "$tmp/k$round.txt" "$dir" "$mode" >"$tmp/landed" || fail "$arch round $round: $(cat "$tmp/landed")"
    landed=$((landed + $(cat "$tmp/landed")))
  done
  [ "$landed" -ge 1 ] || fail "$arch: no SIGKILL landed while a snapshot was being written"
  start "$m" --kv-disk-dir "$dir"
  files=$(find "$dir" -name '*.ds4kv' ! -name '.tmp-*' | wc -l)
  grep -q "KV cache on disk in $dir: $files snapshots" "$tmp/log" || fail "$arch: expected all $files snapshot files indexed"
  for i in 2 1; do
    complete "$tmp/k$i.txt" "$tmp/k.json"
    [ "$(field "$tmp/k.json" 'r["choices"][0]["text"]')" = "$(field "$tmp/kref$i.json" 'r["choices"][0]["text"]')" ] \
      || fail "$arch: after the SIGKILLs, the text of the prompt of round $i differs from a server without cache"
  done
  complete "$tmp/p2.txt" "$tmp/d.json"
  [ "$(field "$tmp/d.json" 'r["choices"][0]["text"]')" = "$(field "$tmp/ref.json" 'r["choices"][0]["text"]')" ] \
    || fail "$arch: the text after the SIGKILLs differs"
  [ "$(metric 'ds4_kv_disk_failures_total{op="load"}')" = 0 ] || fail "$arch: a file that loaded badly"
  stop_server
  [ -z "$(find "$dir" -name '.tmp-*')" ] || fail "$arch: temporary files left after a clean stop"
  echo "$arch: $landed of 2 SIGKILLs landed while a snapshot was being written"
done
echo "ok: the disk KV cache resumes prefixes across restarts (seed $seed)"
