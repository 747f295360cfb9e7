#!/usr/bin/env bash
# ds4-server's Anthropic endpoints on loopback: a tiny Qwen3-MoE with the
# real tokenizer, a real server process, the official @anthropic-ai/sdk and
# curl. Checked against things the Anthropic code did not produce: the
# OpenAI endpoint's greedy text for the same conversation (whole, the raw
# stream's text deltas, the SDK's accumulated message), the usage numbers
# (count_tokens = input_tokens + cache_read_input_tokens = the OpenAI
# prompt_tokens), the exact event lifecycle as the SDK parses it,
# stop_sequences against the stop string's first place in the full text, a
# prefill against /v1/completions on the hand-written Qwen3 prompt, a
# system prompt as text blocks, a body over the default limit as a 413 in
# Anthropic's error shape, and thinking blocks under the
# Qwen3-Thinking-2507 template against the OpenAI text split at </think>
# in Python. Malformed requests (400s, 401s, 404s in Anthropic's shape) are
# test_server_hostile.sh's.
set -euo pipefail
client="$DS4_SOURCE_DIR/tests/integration/server_anthropic_client.mjs"
source "$(dirname "$0")/server_helpers.sh"

"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed $RANDOM --out "$tmp/m.gguf" >/dev/null
key=k$RANDOM$RANDOM
start() {  # extra ds4-server arguments
  start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 2 --ctx 512 --api-key "$key" --cache-ram-mb 64 "$@"
}
H=(-H "x-api-key: $key" -H "Content-Type: application/json")
code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
py() { python3 - "$@"; }

start

# The OpenAI endpoint's greedy text, thinking off (Anthropic's default).
oai() {  # messages JSON, max_tokens -> body in $tmp/oai
  curl -s "${H[@]}" "$base/v1/chat/completions" \
    -d "{\"messages\":$1,\"max_tokens\":$2,\"temperature\":0,\"reasoning_effort\":\"none\"}" >"$tmp/oai"
}
# A random model may pick its end token early for some prompt; the checks
# need a reply that runs to max_tokens: the first prompt whose reply does.
for prompt in "Tell me about the sea." "Name three rivers." "Why is the sky blue?" "Count to ten." "Say hello."; do
  oai "[{\"role\":\"user\",\"content\":\"$prompt\"}]" 12
  python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["choices"][0]["finish_reason"] != "length")' \
    "$tmp/oai" && break
done
node "$client" "$deps/npm/node_modules" "$base" "$key" "$prompt" 12 >"$tmp/sdk" 2>&1 || fail "SDK client: $(cat "$tmp/sdk")"
py "$tmp/oai" "$tmp/sdk" <<'PY' || fail "SDK results: $(head -c 2000 "$tmp/sdk")"
import json, sys
oai = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2]))
want = oai["choices"][0]["message"]["content"]
w, s, acc = d["whole"], d["streamed"], d["accumulated"]
assert w["type"] == "message" and w["role"] == "assistant", w
assert w["content"] == [{"type": "text", "text": want}], (w["content"], want)
assert w["stop_reason"] == "max_tokens" and w["stop_sequence"] is None, w
assert w["usage"]["output_tokens"] == 12 == oai["usage"]["completion_tokens"], w["usage"]
total = oai["usage"]["prompt_tokens"]
assert d["count"] == total, (d["count"], total)
for u in (w["usage"], s["startUsage"], s["deltaUsage"], acc["usage"]):
    assert u["input_tokens"] + u["cache_read_input_tokens"] == total, (u, total)
# The first request after the OpenAI one reuses its prompt: cached tokens show.
assert w["usage"]["cache_read_input_tokens"] > 0, w["usage"]
# The lifecycle as the SDK sees it (it drops pings).
ev = s["events"]
n = ev.count("content_block_delta")
assert n > 0 and ev == ["message_start", "content_block_start"] + ["content_block_delta"] * n + \
    ["content_block_stop", "message_delta", "message_stop"], ev
assert s["text"] == want, (s["text"], want)
assert s["stopReason"] == "max_tokens" and s["deltaUsage"]["output_tokens"] == 12, s
assert s["startUsage"]["output_tokens"] == 0, s
assert acc["content"] == w["content"] and acc["stop_reason"] == "max_tokens", acc
r = d["refused"]
assert r["status"] == 400 and r["body"]["type"] == "error", r
assert r["body"]["error"]["type"] == "invalid_request_error" and r["body"]["error"]["message"], r
PY

# The raw stream: every event named as its data's type, pings included.
curl -sN "${H[@]}" "$base/v1/messages" \
  -d "{\"max_tokens\":12,\"temperature\":0,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}]}" >"$tmp/sse"
py "$tmp/sse" "$tmp/oai" <<'PY' || fail "raw stream: $(head -c 1500 "$tmp/sse")"
import json, sys
want = json.load(open(sys.argv[2]))["choices"][0]["message"]["content"]
names, text = [], ""
for block in open(sys.argv[1], encoding="utf-8").read().split("\n\n"):
    if not block.strip(): continue
    lines = block.split("\n")
    assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), block
    name, data = lines[0][7:], json.loads(lines[1][6:])
    assert data["type"] == name, block
    names.append(name)
    if name == "content_block_delta":
        assert data["index"] == 0 and data["delta"]["type"] == "text_delta", data
        text += data["delta"]["text"]
n = names.count("content_block_delta")
assert names == ["message_start", "content_block_start", "ping"] + ["content_block_delta"] * n + \
    ["content_block_stop", "message_delta", "message_stop"], names
assert text == want, (text, want)
PY

# stop_sequences: the reply ends before the first place the stop string
# takes in the full greedy text.
stop=$(py "$tmp/oai" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["choices"][0]["message"]["content"]
mid = len(t) // 2
for i in list(range(mid, len(t) - 1)) + list(range(0, mid)):
    s = t[i:i + 2]
    if "\ufffd" not in s and len(s) == 2:
        print(json.dumps(s)); break
PY
)
[ -n "$stop" ] || fail "no stop string candidate in '$(cat "$tmp/oai")'"
curl -s "${H[@]}" "$base/v1/messages" \
  -d "{\"max_tokens\":12,\"temperature\":0,\"stop_sequences\":[$stop],\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}]}" >"$tmp/stop"
py "$tmp/oai" "$tmp/stop" "$stop" <<'PY' || fail "stop_sequences: $(cat "$tmp/stop")"
import json, sys
full = json.load(open(sys.argv[1]))["choices"][0]["message"]["content"]
d, stop = json.load(open(sys.argv[2])), json.loads(sys.argv[3])
assert d["stop_reason"] == "stop_sequence" and d["stop_sequence"] == stop, d
assert d["content"][0]["text"] == full[:full.index(stop)], (d["content"], full, stop)
PY

# A system prompt as text blocks = the OpenAI system message.
oai '[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi there"}]' 8
sysreq='{"max_tokens":8,"temperature":0,"system":[{"type":"text","text":"Be "},{"type":"text","text":"brief.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"Hi there"}]}]}'
[ "$(code "${H[@]}" "$base/v1/messages" -d "$sysreq")" = 200 ] || fail "system blocks: $(cat "$tmp/body")"
cp "$tmp/body" "$tmp/sys"
[ "$(code "${H[@]}" "$base/v1/messages/count_tokens" -d "$sysreq")" = 200 ] || fail "count_tokens: $(cat "$tmp/body")"
py "$tmp/oai" "$tmp/sys" "$tmp/body" <<'PY' || fail "system: $(cat "$tmp/sys")"
import json, sys
oai, d, c = (json.load(open(p)) for p in sys.argv[1:4])
assert d["content"][0]["text"] == oai["choices"][0]["message"]["content"], (d, oai)
assert c == {"input_tokens": oai["usage"]["prompt_tokens"]}, (c, oai["usage"])
PY

# A prefill (a final assistant message) continues the prompt the Qwen3
# template renders, written here by hand and sent as a plain completion.
pre='{"max_tokens":8,"temperature":0,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"The sea is"}]}'
[ "$(code "${H[@]}" "$base/v1/messages" -d "$pre")" = 200 ] || fail "prefill: $(cat "$tmp/body")"
cp "$tmp/body" "$tmp/pre"
raw=$(py <<'PY'
import json
print(json.dumps({"prompt": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nThe sea is",
                  "max_tokens": 8, "temperature": 0}))
PY
)
curl -s "${H[@]}" "$base/v1/completions" -d "$raw" >"$tmp/raw"
[ "$(code "${H[@]}" "$base/v1/messages/count_tokens" -d "$pre")" = 200 ] || fail "count_tokens prefill"
py "$tmp/pre" "$tmp/raw" "$tmp/body" <<'PY' || fail "prefill: $(cat "$tmp/pre") vs $(cat "$tmp/raw")"
import json, sys
d, raw, c = (json.load(open(p)) for p in sys.argv[1:4])
assert d["content"][0]["text"] == raw["choices"][0]["text"], (d, raw)
assert c["input_tokens"] == raw["usage"]["prompt_tokens"], (c, raw["usage"])
PY

# A body over the default limit (8 MiB): 413 in Anthropic's error shape.
ashape() {  # expected status, expected error type, curl arguments
  local want=$1 type=$2; shift 2
  local got; got=$(code "$@")
  [ "$got" = "$want" ] || fail "expected $want, got $got for: $* -> $(head -c 300 "$tmp/body")"
  py "$tmp/body" "$type" <<'PY' || fail "not an Anthropic $type error body for: $* -> $(head -c 300 "$tmp/body")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["type"] == "error" and d["error"]["type"] == sys.argv[2] and d["error"]["message"], d
PY
}
M="$base/v1/messages"
ok='{"max_tokens":2,"messages":[{"role":"user","content":"x"}]}'
[ "$(code -H "Authorization: Bearer $key" "$M" -d "$ok")" = 200 ] || fail "Bearer refused on /v1/messages"
head -c $((9 << 20)) /dev/zero | tr '\0' ' ' >"$tmp/big"
ashape 413 request_too_large "${H[@]}" "$M" --data-binary @"$tmp/big"
[ "$(code "${H[@]}" "$base/v1/messages/count_tokens" -d '{"messages":[{"role":"user","content":"x"}]}')" = 200 ] \
  || fail "count_tokens without max_tokens: $(cat "$tmp/body")"
stop_server

# Thinking blocks: Qwen3-Thinking-2507 opens the reasoning in the prompt, so
# the reply is reasoning until </think>; the OpenAI endpoint returns it raw.
start --chat-template qwen3-thinking-2507
oai "[{\"role\":\"user\",\"content\":\"$prompt\"}]" 12
node "$client" "$deps/npm/node_modules" "$base" "$key" "$prompt" 12 '{"thinking":{"type":"enabled","budget_tokens":1024}}' \
  >"$tmp/sdk" 2>&1 || fail "SDK client (thinking): $(cat "$tmp/sdk")"
py "$tmp/oai" "$tmp/sdk" <<'PY' || fail "thinking: $(head -c 2000 "$tmp/sdk") vs $(cat "$tmp/oai")"
import json, sys
oai = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2]))
raw = oai["choices"][0]["message"]["content"]
think, sep, answer = raw.partition("</think>")
think, answer = think.strip(), answer.lstrip()
want = ([{"type": "thinking", "thinking": think, "signature": ""}] if think else []) + \
       ([{"type": "text", "text": answer}] if answer else [])
if not want: want = [{"type": "text", "text": ""}]
assert d["whole"]["content"] == want, (d["whole"]["content"], want)
assert d["accumulated"]["content"] == want, (d["accumulated"]["content"], want)
s = d["streamed"]
assert s["thinking"] == think and s["text"] == answer, (s, think, answer)
assert s["events"][:2] == ["message_start", "content_block_start"], s["events"]
assert d["count"] == oai["usage"]["prompt_tokens"], (d["count"], oai["usage"])
PY
stop_server
echo "server anthropic: ok"
