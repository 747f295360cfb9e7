#!/usr/bin/env bash
# ds4-server's /v1/responses on loopback: a tiny Qwen3-MoE with the real
# tokenizer and template, a real server process, the official openai SDK
# (client.responses) and curl, checked against what the Responses code did
# not produce: /v1/chat/completions' greedy reply and usage for the same
# conversation (plain, with a forced tool call, and a tool round trip in
# chat's tool_calls + tool message shape), the exact event lifecycle and
# sequence numbers of the raw stream, the SDK's own accumulation of it,
# and the KV prefix a stateless next turn (input + the response's output)
# reuses; bad requests are 400s in OpenAI's error shape; /metrics counts
# the endpoint. A random-weight model never closes a tool call of its
# own, so the round trip sends the call an agent would have gotten (or the
# model's, when it does close one). One server start.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"

"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
key=k$RANDOM$RANDOM
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 2 --ctx 1024 --api-key "$key" --cache-ram-mb 64
H=(-H "Authorization: Bearer $key" -H "Content-Type: application/json")
n=10

# A random model may end a reply early; the checks want one that runs to
# the limit (then status "incomplete"): the first prompt whose reply does.
words=(sea river mountain sky city forest winter light stone music)
for i in 1 2 3 4 5; do
  prompt="Tell me about the ${words[$(( (seed + i) % 10 ))]} and the ${words[$(( (seed * 7 + i) % 10 ))]}."
  curl -s "${H[@]}" "$base/v1/chat/completions" -d "$(python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":sys.argv[1]}],"max_tokens":int(sys.argv[2]),"temperature":0}))' "$prompt" "$n")" >"$tmp/oai"
  python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["choices"][0]["finish_reason"] != "length")' "$tmp/oai" && break
done

node "$src/tests/integration/server_responses_client.mjs" "$deps/npm/node_modules" "$base" "$key" "$prompt" "$n" \
  >"$tmp/sdk" 2>"$tmp/sdk.err" || fail "SDK client: $(head -c 3000 "$tmp/sdk.err")"
python3 - "$tmp/sdk" <<'PY' || fail "SDK results: $(head -c 3000 "$tmp/sdk")"
import json, sys
d = json.load(open(sys.argv[1]))

def split(raw):
    """Chat's raw greedy text as the Responses reply reads it: a reasoning
    block opened first (chat/thinking.h), then the answer."""
    s = raw.lstrip()
    if not s.startswith("<think>"):
        return "", raw
    reasoning, _, answer = s[len("<think>"):].partition("</think>")
    return reasoning.strip(), answer.lstrip()

def parts(resp):
    """(reasoning, text, [(name, arguments)]) of a response's output."""
    reasoning = "".join(c["text"] for o in resp["output"] if o["type"] == "reasoning" for c in o["content"])
    text = "".join(c["text"] for o in resp["output"] if o["type"] == "message" for c in o["content"])
    calls = [(o["name"], o["arguments"]) for o in resp["output"] if o["type"] == "function_call"]
    return reasoning, text, calls

def chat_parts(c):
    m = c["choices"][0]["message"]
    return (m.get("reasoning_content") or "", m.get("content") or "",
            [(t["function"]["name"], t["function"]["arguments"]) for t in m.get("tool_calls") or []])

# The whole response = the chat endpoint's greedy reply, usage included.
w, cw = d["whole"], d["chatWhole"]
finish = cw["choices"][0]["finish_reason"]
want_reasoning, want = split(cw["choices"][0]["message"]["content"])
assert w["object"] == "response" and w["id"].startswith("resp_") and w["model"] == "m", w
assert parts(w)[:2] == (want_reasoning, want), (parts(w), want_reasoning, want)
status = "incomplete" if finish == "length" else "completed"
assert w["status"] == status, (w["status"], finish)
if status == "incomplete":
    assert w["incomplete_details"] == {"reason": "max_output_tokens"}, w
    assert w["output"][-1]["status"] == "incomplete", w["output"]
u, cu = w["usage"], cw["usage"]
assert u["input_tokens"] == cu["prompt_tokens"] and u["output_tokens"] == cu["completion_tokens"], (u, cu)
assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"], u
assert 0 <= u["input_tokens_details"]["cached_tokens"] < u["input_tokens"], u
assert w["instructions"] == "Be brief." and w["max_output_tokens"] >= u["output_tokens"] and w["temperature"] == 0, w

# The stream: the exact lifecycle, numbered 0, 1, 2, ...; its deltas are the text.
ev = d["events"]
types = [e["type"] for e in ev]
k = types.count("response.output_text.delta")
head = ["response.created", "response.in_progress"]
msg = ["response.output_item.added", "response.content_part.added"] + ["response.output_text.delta"] * k + \
      ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
if want_reasoning:
    r = types.count("response.reasoning_text.delta")
    msg = ["response.output_item.added", "response.content_part.added"] + ["response.reasoning_text.delta"] * r + \
          ["response.reasoning_text.done", "response.content_part.done", "response.output_item.done"] + (msg if want else [])
assert types == head + msg + ["response." + status], types
assert [e["sequence_number"] for e in ev] == list(range(len(ev))), [e["sequence_number"] for e in ev]
assert "".join(e["delta"] for e in ev if e["type"] == "response.output_text.delta") == want, ev
final = ev[-1]["response"]
assert parts(final) == parts(w) and final["status"] == status, (final, w)
assert final["usage"]["input_tokens"] == u["input_tokens"] and final["usage"]["output_tokens"] == u["output_tokens"], final
assert ev[0]["response"]["status"] == "in_progress" and ev[0]["response"]["output"] == [], ev[0]
# The SDK's accumulator over the same events.
assert parts(d["accumulated"])[1] == want, (d["accumulated"], want)
# The same conversation as typed items.
assert parts(d["items"]) == parts(w) and d["items"]["usage"]["input_tokens"] == u["input_tokens"], d["items"]

# A forced call: the same prompt and reply as the chat endpoint's; the
# stream announces the call first.
fw, cf = d["forcedWhole"], d["chatForced"]
assert fw["usage"]["input_tokens"] == cf["usage"]["prompt_tokens"], (fw["usage"], cf["usage"])
assert parts(fw) == chat_parts(cf), (parts(fw), chat_parts(cf))
fe = d["forcedEvents"]
assert fe[2]["type"] == "response.output_item.added" and fe[2]["item"]["type"] == "function_call", fe[:3]
assert fe[2]["item"]["name"] == "get_weather" and fe[2]["item"]["call_id"].startswith("call_"), fe[2]
assert [e["sequence_number"] for e in fe] == list(range(len(fe)))
# The round trip: the function_call item and its output render as chat's
# tool_calls and tool message do; the reply is chat's.
rd, cr = d["round"], d["chatRound"]
assert rd["usage"]["input_tokens"] == cr["usage"]["prompt_tokens"], (rd["usage"], cr["usage"])
assert parts(rd) == chat_parts(cr), (parts(rd), chat_parts(cr))
# The next turn, stateless: it reuses the first turn's prompt (all but the
# generation prompt's last token, which may merge with the reply's start).
first, nxt = d["first"], d["next"]
assert parts(first) == parts(w), (first, w)
assert nxt["usage"]["input_tokens_details"]["cached_tokens"] >= first["usage"]["input_tokens"] - 1, (nxt["usage"], first["usage"])
# Refusals.
params = ["input", "input", "input[0].role", "input[0].content[0]", "tools[0].type", "previous_response_id",
          "max_output_tokens", "temperature", "input[0].call_id", "input"]
assert [r["param"] for r in d["refusals"]] == params, d["refusals"]
for r in d["refusals"]:
    assert r["status"] == 400 and r["type"] == "invalid_request_error", r
    assert r["message"] and r["message"].endswith(".") and "\n" not in r["message"], r
print(json.dumps(want))
PY

# The raw stream: every event named as its data's type, the numbers in order.
python3 -c 'import json,sys; print(json.dumps({"input":sys.argv[1],"instructions":"Be brief.","max_output_tokens":int(sys.argv[2]),"temperature":0,"stream":True}))' \
  "$prompt" "$n" >"$tmp/req"
curl -sN "${H[@]}" "$base/v1/responses" -d @"$tmp/req" >"$tmp/sse"
python3 - "$tmp/sse" "$tmp/sdk" <<'PY' || fail "raw stream: $(head -c 1500 "$tmp/sse")"
import json, sys
blocks = [b for b in open(sys.argv[1], encoding="utf-8").read().split("\n\n") if b.strip()]
sdk = [e["type"] for e in json.load(open(sys.argv[2]))["events"]]
names = []
for i, b in enumerate(blocks):
    lines = b.split("\n")
    assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), b
    data = json.loads(lines[1][6:])
    assert data["type"] == lines[0][7:] and data["sequence_number"] == i, b
    names.append(data["type"])
assert names == sdk, (names, sdk)
PY

# /metrics counts the endpoint by status.
curl -s "${H[@]}" "$base/metrics" >"$tmp/metrics"
python3 - "$tmp/metrics" <<'PY' || fail "metrics: $(grep responses "$tmp/metrics")"
import re, sys
text = open(sys.argv[1]).read()
def count(status):
    m = re.search(r'ds4_requests_total\{endpoint="/v1/responses",status="%d"\} (\d+)' % status, text)
    return int(m.group(1)) if m else 0
assert count(200) >= 10 and count(400) >= 10, (count(200), count(400))
PY
kill -TERM "$pid"
wait "$pid" || fail "exit status $? after SIGTERM"
pid=
echo "server responses: ok"
