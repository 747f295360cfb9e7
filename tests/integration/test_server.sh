#!/usr/bin/env bash
# ds4-server end to end on loopback: a tiny Qwen3-MoE with the real
# tokenizer, a real server process and real clients (curl, the official
# openai npm SDK). Checks: health and models; API keys; greedy chat text is
# the same non-streamed, streamed, through the SDK and from the ds4 CLI;
# usage numbers and cached prompt tokens; completions; three requests at
# once each give their text alone; SIGTERM stops it with status 0.
# Malformed and hostile requests (and clients that leave mid-stream) are
# test_server_hostile.sh's.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"

"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
key=k$RANDOM$RANDOM
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 3 --ctx 512 --api-key "$key" --cache-ram-mb 256
[ "$(curl -s "$base/health")" = '{"status":"ok"}' ] || fail "health"
grep -q "listening on http://127.0.0.1:$port" "$tmp/log" || fail "no listening line"

H=(-H "Authorization: Bearer $key" -H "Content-Type: application/json")
code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
json() { python3 -c "import json,sys; d=json.load(open('$tmp/body')); print($1)"; }

# Keys: none or a wrong one is 401 with the error shape; x-api-key works too.
[ "$(code "$base/v1/models")" = 401 ] || fail "no key was let in"
[ "$(json 'd["error"]["type"]')" = authentication_error ] || fail "401 shape"
[ "$(code -H "Authorization: Bearer nope" "$base/v1/models")" = 401 ] || fail "a wrong key was let in"
[ "$(code -H "x-api-key: $key" "$base/v1/models")" = 200 ] || fail "x-api-key refused"
[ "$(json 'd["data"][0]["id"]')" = m.gguf ] || fail "model id"

# Greedy chat: whole, streamed, and the CLI agree. A random model may pick
# its end token early for some prompt; the checks need a reply that runs to
# max_tokens, so the first prompt whose greedy reply does is used.
for prompt in "Tell me about the sea." "Name three rivers." "Why is the sky blue?" "Count to ten." "Say hello."; do
  req="{\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}],\"max_tokens\":12,\"temperature\":0}"
  [ "$(code "${H[@]}" "$base/v1/chat/completions" -d "$req")" = 200 ] || fail "chat: $(cat "$tmp/body")"
  [ "$(json 'd["choices"][0]["finish_reason"]')" = length ] && break
done
whole=$(json 'd["choices"][0]["message"]["content"]')
[ "$(json 'd["usage"]["completion_tokens"]')" = 12 ] || fail "completion_tokens"
[ "$(json 'd["choices"][0]["finish_reason"]')" = length ] || fail "finish_reason"
[ -n "$whole" ] || fail "empty reply"
curl -sN "${H[@]}" "$base/v1/chat/completions" \
  -d "${req%\}},\"stream\":true,\"stream_options\":{\"include_usage\":true}}" >"$tmp/sse"
streamed=$(python3 - "$tmp/sse" <<'PY'
import json, sys
text, done, usage = "", False, None
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.rstrip("\n")
    if not line.startswith("data: "): continue
    if line == "data: [DONE]": done = True; continue
    d = json.loads(line[6:])
    if d.get("usage"): usage = d["usage"]
    for c in d["choices"]: text += c["delta"].get("content", "")
assert done and usage and usage["prompt_tokens_details"]["cached_tokens"] > 0, (done, usage)
print(text)
PY
) || fail "stream: $(head -c 600 "$tmp/sse")"
[ "$streamed" = "$whole" ] || fail "streamed text differs: '$streamed' vs '$whole'"
# The CLI prints the model's bytes as they are; JSON carries text, so the
# server replaces bytes that are not UTF-8 (a random model emits such
# tokens) with U+FFFD: compare the CLI's bytes decoded the same way.
"$bin/ds4" -m "$tmp/m.gguf" --backend cpu -t 2 -p "$prompt" -n 12 --temp 0 >"$tmp/cli" 2>/dev/null
printf '%s' "$whole" >"$tmp/whole"
python3 - "$tmp/cli" "$tmp/whole" <<'PY' || fail "the CLI says '$(cat "$tmp/cli")', the server '$whole'"
import sys
cli = open(sys.argv[1], "rb").read().decode("utf-8", "replace").rstrip("\n")
whole = open(sys.argv[2], "rb").read().decode("utf-8")
sys.exit(0 if cli == whole else 1)
PY

# The official SDK.
out=$(node "$DS4_SOURCE_DIR/tests/integration/server_openai_client.mjs" "$deps/npm/node_modules" "$base/v1" "$key" \
      "$prompt" 2>&1) || fail "openai SDK client failed: $out"
python3 - "$out" "$whole" <<'PY' || fail "SDK results: $out"
import json, sys
d, whole = json.loads(sys.argv[1]), sys.argv[2]
assert d["whole"] == whole and d["streamed"] == whole, d
assert d["whole_finish"] == "length" and d["finish"] == "length", d
assert d["usage"]["completion_tokens"] == 12 and d["usage"]["prompt_tokens"] > 0, d
assert d["completion"], d
assert d["refused"]["status"] == 400, d
PY

# Three at once: each the text it gets alone.
declare -a alone
for i in 0 1 2; do
  r="{\"messages\":[{\"role\":\"user\",\"content\":\"Question number $i?\"}],\"max_tokens\":10,\"temperature\":0}"
  code "${H[@]}" "$base/v1/chat/completions" -d "$r" >/dev/null
  alone[$i]=$(json 'd["choices"][0]["message"]["content"]')
done
clients=()
for i in 0 1 2; do
  r="{\"messages\":[{\"role\":\"user\",\"content\":\"Question number $i?\"}],\"max_tokens\":10,\"temperature\":0}"
  curl -s --max-time 120 "${H[@]}" "$base/v1/chat/completions" -d "$r" >"$tmp/par$i" &
  clients+=($!)
done
for c in "${clients[@]}"; do wait "$c" || fail "a parallel request failed"; done
for i in 0 1 2; do
  got=$(python3 -c "import json; print(json.load(open('$tmp/par$i'))['choices'][0]['message']['content'])")
  [ "$got" = "${alone[$i]}" ] || fail "parallel request $i: '$got' vs alone '${alone[$i]}'"
done

grep -q "^request " "$tmp/log" || fail "no request log lines"

# SIGTERM: the server stops within 10 s, with status 0.
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "SIGTERM did not stop the server within 10 s"
wait "$pid" && st=0 || st=$?
pid=
[ "$st" = 0 ] || fail "exit status $st after SIGTERM"
echo "server: ok"
