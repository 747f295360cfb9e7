#!/usr/bin/env bash
# A client that gives up on a whole (non-streamed) reply cancels its
# generation at once: a tiny Qwen3-MoE on one slot with a 4096-token
# context (a reply to its end takes many seconds here), the official SDKs
# with a 0.5 s timeout on each API (chat, completions, responses,
# messages), over HTTP and over HTTPS (where the server finds the socket
# another way). Each time: the SDK gave up, the slot is free at once (a
# few tens of ms here; within 2 s allowed), the generation counted as ended
# with far fewer tokens than the context allows, no decode work after that,
# /metrics counts a 499, and the next request on the same slot is served
# at once.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"

ctx=4096
"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
key=k$RANDOM$RANDOM

# run ENDPOINTS: the SDK client's results checked; CA for HTTPS in $cacert.
run() {
  NODE_EXTRA_CA_CERTS=${cacert:-} node "$src/tests/integration/server_disconnect_client.mjs" "$deps/npm/node_modules" \
    "$base" "$key" "$1" >"$tmp/out" 2>"$tmp/err" || fail "SDK client: $(head -c 2000 "$tmp/err")"
  python3 - "$tmp/out" "$ctx" <<'PY' || fail "$(head -c 3000 "$tmp/out")"
import json, sys
ctx = int(sys.argv[2])
for r in json.load(open(sys.argv[1])):
    name = r["endpoint"]
    assert r["error"] and "Timeout" in r["error"] and 400 <= r["gaveUpAfter"] < 3000, \
        f"{name}: expected the SDK to give up after its 0.5 s timeout, got {r['error']} after {r['gaveUpAfter']:.0f} ms"
    # (Bounds with room for a sanitizer build on a busy machine: a reply
    # run to the context's end takes ten times longer here.)
    assert r["slots"] == 0 and r["generationsAfter"] == r["generationsBefore"] + 1 and r["freedAfter"] < 2000, \
        f"{name}: expected the slot free and the generation ended within 2 s of the client leaving, got {r}"
    assert 0 < r["generated"] < ctx // 2, \
        f"{name}: expected the cancelled generation to have written a few hundred tokens at most (not ~{ctx}), got {r['generated']}"
    assert r["decodeGrew"] == 0, f"{name}: expected no decode work after the cancel, got {r['decodeGrew']} more tokens"
    assert r["status499"] == 1, f"{name}: expected /metrics to count one 499, got {r['status499']}"
    assert r["nextMs"] < 3000 and r["nextFinish"] in ("length", "stop"), \
        f"{name}: expected the next request served at once, it took {r['nextMs']:.0f} ms"
    print(f"{name}: gave up after {r['gaveUpAfter']:.0f} ms, slot free {r['freedAfter']:.0f} ms later, "
          f"{r['generated']} tokens written, next request {r['nextMs']:.0f} ms")
PY
}

start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 1 --ctx "$ctx" --api-key "$key"
run chat,completions,responses,messages
[ "$(grep -c '499: ' "$tmp/log")" = 4 ] || fail "expected four requests logged with status 499: $(grep '^request' "$tmp/log")"
stop_server

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext "subjectAltName=IP:127.0.0.1" -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
base=https://127.0.0.1:$port
cacert=$tmp/cert.pem
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 1 --ctx "$ctx" --api-key "$key" \
  --ssl-cert-file "$tmp/cert.pem" --ssl-key-file "$tmp/key.pem"
run chat
stop_server
echo "server disconnect: ok"
