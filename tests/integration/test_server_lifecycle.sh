#!/usr/bin/env bash
# ds4-server's lifecycle and HTTP layer on loopback: a fresh tiny random
# Qwen3-MoE, real server processes, curl and the official openai npm SDK.
#   - SIGTERM while an OpenAI and an Anthropic stream run, with time to
#     spare (--shutdown-timeout 30): both streams finish whole ([DONE],
#     message_stop), a request sent during the drain is refused (503 JSON
#     or no connection, never a hang), the disk KV cache is flushed, and
#     the exit status is 0;
#   - SIGTERM with --shutdown-timeout 1 while two streams run toward a huge
#     max_tokens: both are cancelled after about a second and still end the
#     way their APIs end (a finish chunk and [DONE]; Anthropic's terminal
#     event), and the server exits 0 soon after;
#   - --cors: the preflight (204, no API key needed), the allowed origin
#     echoed with Vary: Origin on answers and errors, another origin not;
#   - TLS (--ssl-cert-file/--ssl-key-file) with a self-signed certificate
#     made here: https with curl and the openai SDK, plain http to that port
#     fails, a key of another certificate exits 2 before any load; no CORS
#     headers without --cors; a second SIGTERM cancels at once.
# That a restarted server resumes prefixes from --kv-disk-dir is
# test_server_kv_disk.sh's; the bad flag combinations are
# test_server_args.sh's.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"
RANDOM=$seed

"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
J=(-H "Content-Type: application/json")

# Request bodies: sampled, so a stream nearly always runs to max_tokens (a
# random model rarely picks its end token then; the checks allow for it).
openai_stream() {  # MAX_TOKENS
  echo "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a long story.\"}],\"max_tokens\":$1,\"temperature\":1,\"seed\":$RANDOM,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
}
anthropic_stream() {  # MAX_TOKENS
  echo "{\"model\":\"m\",\"max_tokens\":$1,\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about the sea.\"}],\"temperature\":1,\"stream\":true}"
}
# until_seen FILE PATTERN N: waits until FILE holds N lines matching PATTERN.
until_seen() {
  for _ in $(seq 300); do
    [ "$(grep -c "$2" "$1" 2>/dev/null || true)" -ge "$3" ] && return 0
    sleep 0.05
  done
  fail "no '$2' x$3 in $1: $(head -c 400 "$1")"
}
# sigterm: signals the server and waits until it has begun its drain.
sigterm() {
  t0=$(date +%s%N)
  kill -TERM "$pid"
  until_seen "$tmp/log" "^ds4-server: stopping\|^ds4-server: cancelling" 1
}
# exit_status: waits for the server; sets rc and ms (since the signal).
exit_status() {
  rc=0
  wait "$pid" || rc=$?
  pid=
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}
# check_openai SSE FINISH MAX: one finish chunk with FINISH (a |-list),
# usage, then [DONE] last; prints the completion tokens.
check_openai() {
  python3 - "$@" <<'PY'
import json, sys
path, finishes, most = sys.argv[1], sys.argv[2].split("|"), int(sys.argv[3])
data = [l[6:] for l in open(path, encoding="utf-8").read().split("\n") if l.startswith("data: ")]
assert data and data[-1] == "[DONE]", data[-3:]
chunks = [json.loads(d) for d in data[:-1]]
finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0].get("finish_reason")]
usage = [c["usage"] for c in chunks if c.get("usage")]
assert len(finish) == 1 and finish[0] in finishes, finish
assert len(usage) == 1 and 0 < usage[0]["completion_tokens"] <= most, usage
print(usage[0]["completion_tokens"])
PY
}
# check_anthropic SSE LAST: message_start first, LAST (a |-list) the final
# event, its data in Anthropic's shapes; prints the output tokens (0 when
# the stream ended in an error event).
check_anthropic() {
  python3 - "$@" <<'PY'
import json, sys
path, lasts = sys.argv[1], sys.argv[2].split("|")
events = []
for block in open(path, encoding="utf-8").read().split("\n\n"):
    lines = dict(l.split(": ", 1) for l in block.split("\n") if ": " in l and not l.startswith(":"))
    if "event" in lines: events.append((lines["event"], json.loads(lines["data"])))
names = [e for e, _ in events]
assert names and names[0] == "message_start" and names[-1] in lasts, names[:3] + names[-3:]
assert all(d["type"] == e for e, d in events), "event and data type differ"
if names[-1] == "error":
    assert events[-1][1]["error"]["type"] and events[-1][1]["error"]["message"], events[-1]
    print(0)
else:
    delta = [d for e, d in events if e == "message_delta"]
    assert len(delta) == 1 and delta[0]["delta"]["stop_reason"], delta
    print(delta[0]["usage"]["output_tokens"])
PY
}
# refused URL: a request during the drain gets 503 with an error body
# (/health: {"status":"stopping"}), or no connection at all; a hang
# (curl's timeout, 28) fails.
refused() {
  local rc=0 code
  code=$(curl -s --max-time 10 -o "$tmp/refused" -w '%{http_code}' "${J[@]}" "$@") || rc=$?
  case $rc in
    7|52|56) echo "during the drain: curl exit $rc (no answer) for $*"; return 0 ;;  # refused, or closed unanswered
    0) [ "$code" = 503 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d.get("error") or d["status"] == "stopping"' "$tmp/refused" \
         && echo "during the drain: 503 $(cat "$tmp/refused")" && return 0 ;;
  esac
  fail "during the drain $* got curl $rc, HTTP ${code:-none}: $(head -c 300 "$tmp/refused" 2>/dev/null)"
}

# ---- 1. A drain with time to spare: the streams finish whole.
n=$((60 + RANDOM % 60))
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 2 --ctx 1024 --shutdown-timeout 30 --kv-disk-dir "$tmp/kv"
curl -sN "${J[@]}" "$base/v1/chat/completions" -d "$(openai_stream $n)" >"$tmp/a.sse" &
c1=$!
curl -sN "${J[@]}" "$base/v1/messages" -d "$(anthropic_stream $n)" >"$tmp/b.sse" &
c2=$!
until_seen "$tmp/a.sse" '"content":"[^"]' 2
until_seen "$tmp/b.sse" '^event: content_block_delta' 2
sigterm
grep -q "^ds4-server: stopping: [12] requests in flight get up to 30 s to finish" "$tmp/log" || fail "no drain line"
refused "$base/v1/chat/completions" -d "$(openai_stream 4)"
refused "$base/health"
wait $c1 || fail "the OpenAI stream's client: exit $?"
wait $c2 || fail "the Anthropic stream's client: exit $?"
exit_status
[ "$rc" = 0 ] || fail "SIGTERM during a drain: exit $rc"
got=$(check_openai "$tmp/a.sse" "length|stop" $n) || fail "OpenAI stream after SIGTERM: $(tail -c 600 "$tmp/a.sse")"
[ "$got" = $n ] || grep -q '"finish_reason":"stop"' "$tmp/a.sse" || fail "OpenAI stream: $got of $n tokens"
check_anthropic "$tmp/b.sse" "message_stop" >/dev/null || fail "Anthropic stream after SIGTERM: $(tail -c 600 "$tmp/b.sse")"
! grep -q "cancelling" "$tmp/log" || fail "a drain with time to spare cancelled something"
grep -q "^ds4-server: KV cache on disk in $tmp/kv flushed: [1-9][0-9]* snapshots" "$tmp/log" || fail "no flush line"
[ "$(find "$tmp/kv" -name '*.ds4kv' ! -name '.tmp-*' | wc -l)" -ge 1 ] || fail "no snapshot file after the drain"
tail -1 "$tmp/log" | grep -q "^ds4-server: stopped$" || fail "the last line is not 'stopped'"
echo "ok: SIGTERM let two streams of $n tokens finish, refused a new request, flushed the KV cache, exit 0 (${ms} ms)"

# ---- 2. A drain cut short, and CORS on this server.
key=k$RANDOM$RANDOM
origin="https://app$RANDOM.example"
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 2 --ctx 4096 --shutdown-timeout 1 --api-key "$key" \
  --cors "$origin" --cors "http://localhost:$((1024 + RANDOM))"
A=(-H "Authorization: Bearer $key")
header() {  # HEADERS_FILE NAME: the value, "" when absent
  tr -d '\r' <"$1" | awk -v k="$2" '{ i = index($0, ":") }
    i && tolower(substr($0, 1, i - 1)) == tolower(k) { v = substr($0, i + 1); sub(/^[ \t]+/, "", v); print v; exit }'
}
# The preflight: no key, 204, the origin, methods and the SDKs' headers.
code=$(curl -s -o /dev/null -D "$tmp/h" -w '%{http_code}' -X OPTIONS -H "Origin: $origin" \
  -H "Access-Control-Request-Method: POST" -H "Access-Control-Request-Headers: authorization, content-type, x-stainless-os" \
  "$base/v1/chat/completions")
[ "$code" = 204 ] || fail "preflight: HTTP $code"
[ "$(header "$tmp/h" Access-Control-Allow-Origin)" = "$origin" ] || fail "preflight origin: $(cat "$tmp/h")"
header "$tmp/h" Access-Control-Allow-Methods | grep -q POST || fail "preflight methods: $(cat "$tmp/h")"
allowed=$(header "$tmp/h" Access-Control-Allow-Headers)
for h in Authorization Content-Type x-api-key anthropic-version OpenAI-Beta x-stainless-os; do
  grep -qi "\b$h\b" <<<"$allowed" || fail "preflight does not allow $h: $allowed"
done
code=$(curl -s -o /dev/null -D "$tmp/h" -w '%{http_code}' -X OPTIONS -H "Origin: https://evil.example" \
  -H "Access-Control-Request-Method: POST" "$base/v1/messages")
[ "$code" = 403 ] && [ -z "$(header "$tmp/h" Access-Control-Allow-Origin)" ] || fail "another origin's preflight: $code"
# Answers and errors carry the origin (a page can read why it was refused).
for k in "$key" wrong; do
  curl -s -o /dev/null -D "$tmp/h" -H "Origin: $origin" -H "Authorization: Bearer $k" "$base/v1/models"
  [ "$(header "$tmp/h" Access-Control-Allow-Origin)" = "$origin" ] && [ "$(header "$tmp/h" Vary)" = Origin ] \
    || fail "CORS headers with key $k: $(cat "$tmp/h")"
done
curl -s -o /dev/null -D "$tmp/h" -H "Origin: https://evil.example" "${A[@]}" "$base/v1/models"
[ -z "$(header "$tmp/h" Access-Control-Allow-Origin)" ] || fail "another origin was allowed: $(cat "$tmp/h")"

huge=$((100000 + RANDOM))
curl -sN "${J[@]}" "${A[@]}" "$base/v1/chat/completions" -d "$(openai_stream $huge)" >"$tmp/a.sse" &
c1=$!
curl -sN "${J[@]}" "${A[@]}" "$base/v1/messages" -d "$(anthropic_stream $huge)" >"$tmp/b.sse" &
c2=$!
until_seen "$tmp/a.sse" '"content":"[^"]' 2
until_seen "$tmp/b.sse" '^event: content_block_delta' 2
sigterm
wait $c1 || fail "the OpenAI stream's client: exit $? (a truncated response?)"
wait $c2 || fail "the Anthropic stream's client: exit $? (a truncated response?)"
exit_status
[ "$rc" = 0 ] || fail "SIGTERM with a short timeout: exit $rc"
[ "$ms" -ge 900 ] && [ "$ms" -le 8000 ] || fail "exit ${ms} ms after SIGTERM with --shutdown-timeout 1"
grep -q "^ds4-server: cancelling [12] requests still in flight" "$tmp/log" || fail "no cancel line"
# (A stream that met its end token before the timeout ends with "stop".)
got=$(check_openai "$tmp/a.sse" "cancelled|stop" $huge) || fail "cancelled OpenAI stream: $(tail -c 600 "$tmp/a.sse")"
check_anthropic "$tmp/b.sse" "error|message_stop" >/dev/null || fail "cancelled Anthropic stream: $(tail -c 600 "$tmp/b.sse")"
grep -q '"finish_reason":"cancelled"' "$tmp/a.sse" || grep -q '^event: error' "$tmp/b.sse" || fail "neither stream was cancelled"
echo "ok: --shutdown-timeout 1 cancelled two streams (one at $got tokens), both ended well-formed, exit 0 after ${ms} ms"
echo "ok: --cors preflight and headers"

# ---- 3. TLS with a self-signed certificate for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$tmp/other.pem" 2>/dev/null
rc=0
"$bin/ds4-server" -m "$tmp/m.gguf" --port "$port" --ssl-cert-file "$tmp/cert.pem" --ssl-key-file "$tmp/other.pem" \
  2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && ! grep -q "model map" "$tmp/err" \
  || fail "a key of another certificate: exit $rc: $(cat "$tmp/err")"
base=https://127.0.0.1:$port
cacert=$tmp/cert.pem
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 2 --ctx 1024 --ssl-cert-file "$tmp/cert.pem" \
  --ssl-key-file "$tmp/key.pem"
grep -q "listening on https://127.0.0.1:$port" "$tmp/log" || fail "no https listening line"
[ "$(curl -s --cacert "$cacert" "$base/health")" = '{"status":"ok"}' ] || fail "https health"
rc=0
curl -s --max-time 10 -o /dev/null "http://127.0.0.1:$port/health" || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 28 ] || fail "plain http to the TLS port: curl exit $rc"
curl -s --cacert "$cacert" -o /dev/null -D "$tmp/h" -H "Origin: $origin" "$base/v1/models"
! grep -qi "^access-control" "$tmp/h" || fail "CORS headers without --cors: $(cat "$tmp/h")"
out=$(NODE_EXTRA_CA_CERTS=$cacert node "$src/tests/integration/server_openai_client.mjs" "$deps/npm/node_modules" \
      "$base/v1" any-key "Tell me about the sea." 2>&1) || fail "openai SDK over https: $out"
python3 - "$out" <<'PY' || fail "SDK over https: $out"
import json, sys
d = json.loads(sys.argv[1])
assert d["whole"] == d["streamed"] and d["whole_finish"] == d["finish"], d
assert d["usage"]["completion_tokens"] > 0 and d["completion"] is not None, d
assert d["refused"]["status"] == 400, d
PY
[ "$(curl -s --cacert "$cacert" "$base/health")" = '{"status":"ok"}' ] || fail "https health after the plain-http attempt"
echo "ok: https with curl and the openai SDK, plain http refused, a mismatched key exits 2"
# A second signal cancels at once (this server gives the default 30 s).
curl -sN --cacert "$cacert" "${J[@]}" "$base/v1/chat/completions" -d "$(openai_stream $huge)" >"$tmp/a.sse" &
c1=$!
until_seen "$tmp/a.sse" '"content":"[^"]' 2
sigterm
kill -TERM "$pid"
wait $c1 || fail "the stream's client after two signals: exit $?"
exit_status
[ "$rc" = 0 ] && [ "$ms" -le 8000 ] || fail "two SIGTERMs with TLS: exit $rc after ${ms} ms"
check_openai "$tmp/a.sse" "cancelled|stop" $huge >/dev/null || fail "stream after two signals: $(tail -c 600 "$tmp/a.sse")"
echo "ok: a second SIGTERM cancelled the stream at once, exit 0 after ${ms} ms (seed $seed)"
