#!/usr/bin/env bash
# DeepSeek V4 through ds4-server: a tiny synthetic DeepSeek V4 (the
# published layout and quant mix, random weights) with its real tokenizer
# and chat template, a real server process, the official openai and
# @anthropic-ai/sdk clients (server_deepseek4_client.mjs), checked against
# the `ds4` CLI on the same file and prompt, greedy:
#  - chat completions, whole and streamed, with thinking on (the template's
#    default: the prompt ends in <think>) and off (reasoning_effort "none"),
#    are the CLI's text (its default and --nothink), usage and finish
#    reasons alike;
#  - the reasoning as each API returns it apart is the CLI's text up to
#    </think>, the answer what follows: the Responses API's reasoning item
#    and message, Anthropic's thinking and text blocks (whole and
#    streamed), all from the same prompt (their token counts agree);
#    with tools offered, chat's reasoning_content, whole = streamed;
#  - a tool round trip in DSML: a named tool_choice ends the prompt with the
#    opening of a DSML invoke, so the stream announces the call at once;
#    the next turn (the call and its result) is served, whole = streamed.
# (The exact token counts of DSML tool prompts against the reference
# template: test_server_tools.sh.) One server start.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"

"$bin/ds4-gguf" synth --arch deepseek4 --preset tiny --quant q2 --seed "$seed" --out "$tmp/d.gguf" >/dev/null
key=k$RANDOM$RANDOM
start_server -m "$tmp/d.gguf" --backend cpu -t 2 --parallel 1 --ctx 1024 --api-key "$key" --cache-ram-mb 64
words=(sea river mountain sky city forest winter light stone music)
prompt="Tell me about the ${words[$((seed % 10))]} and the ${words[$(( (seed / 10) % 10 ))]}."
n=12

node "$src/tests/integration/server_deepseek4_client.mjs" "$deps/npm/node_modules" "$base" "$key" "$prompt" "$n" \
  >"$tmp/sdk" 2>"$tmp/sdk.err" || fail "SDK client: $(head -c 3000 "$tmp/sdk.err")"
"$bin/ds4" -m "$tmp/d.gguf" --backend cpu -t 2 -p "$prompt" -n "$n" --temp 0 >"$tmp/cli_think" 2>"$tmp/cli.err" \
  || fail "ds4: $(tail -3 "$tmp/cli.err")"
"$bin/ds4" -m "$tmp/d.gguf" --backend cpu -t 2 -p "$prompt" -n "$n" --temp 0 --nothink >"$tmp/cli_nothink" 2>"$tmp/cli.err" \
  || fail "ds4 --nothink: $(tail -3 "$tmp/cli.err")"

python3 - "$tmp/sdk" "$tmp/cli_think" "$tmp/cli_nothink" "$n" <<'PY' || fail "checks: $(head -c 3000 "$tmp/sdk")"
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[4])
# The CLI prints the model's bytes as they are, nothing after them (a reply
# may end in newlines of its own: seed 563 ends in four); JSON carries text,
# so the server replaces bytes that are not UTF-8 (a random model writes
# such tokens) with U+FFFD: the CLI's bytes are decoded the same way.
def cli(path):
    return open(path, "rb").read().decode("utf-8", "replace")

def check_chat(whole, stream, want, what):
    c = whole["choices"][0]
    assert c["message"]["content"] == want, f"{what}: the server says {c['message']['content']!r}, the CLI {want!r}"
    assert stream["text"] == want and stream["finish"] == c["finish_reason"], f"{what}: streamed {stream!r}"
    assert whole["usage"]["completion_tokens"] == stream["usage"]["completion_tokens"] <= n, (whole["usage"], stream["usage"])
    assert whole["usage"]["prompt_tokens"] == stream["usage"]["prompt_tokens"], (whole["usage"], stream["usage"])
    assert (c["finish_reason"] == "length") == (whole["usage"]["completion_tokens"] == n), (c, whole["usage"])

raw = cli(sys.argv[2])
check_chat(d["thinking"], d["thinkingStream"], raw, "thinking on")
check_chat(d["noThinking"], d["noThinkingStream"], cli(sys.argv[3]), "thinking off")

# The reasoning apart: the CLI's text up to </think>, trimmed; the answer after it.
reasoning, closed, answer = raw.partition("</think>")
reasoning, answer = reasoning.strip(), answer.lstrip()
assert reasoning, "the random reply has no reasoning to check (it closed </think> at once)"
prompt_tokens = d["thinking"]["usage"]["prompt_tokens"]
r = d["responses"]
assert r["usage"]["input_tokens"] == prompt_tokens, (r["usage"], prompt_tokens)
got = {o["type"]: "".join(c["text"] for c in o["content"]) for o in r["output"]}
assert got.get("reasoning") == reasoning, ("responses reasoning", got, reasoning)
assert got.get("message", "") == answer, ("responses message", got, answer)
for name in ("claude", "claudeStream"):
    m = d[name]
    assert m["usage"]["input_tokens"] + m["usage"]["cache_read_input_tokens"] == prompt_tokens, (name, m["usage"])
    blocks = [(b["type"], b.get("thinking", b.get("text"))) for b in m["content"]]
    want = [("thinking", reasoning)] + ([("text", answer)] if answer else [])
    assert blocks == want, (name, blocks, want)
# With tools offered, chat returns the reasoning in reasoning_content.
w, s = d["withTools"]["choices"][0]["message"], d["withToolsStream"]
assert w.get("reasoning_content") and "</think>" not in w["reasoning_content"], w
assert s["reasoning"] == w["reasoning_content"] and s["text"] == (w["content"] or ""), (s, w)
assert d["withTools"]["usage"]["prompt_tokens"] > prompt_tokens, d["withTools"]["usage"]

# The DSML round trip.
fs = d["forcedStream"]["choices"][0]["message"]
assert (fs.get("tool_calls") or [{}])[0].get("function", {}).get("name") == "get_weather", fs
fw = d["forced"]["choices"][0]["message"]
assert (fw.get("tool_calls") or [{}])[0].get("function", {}).get("name") == "get_weather" or \
    "get_weather" in (fw.get("content") or ""), fw
nw, ns = d["next"], d["nextStream"]
assert nw["usage"]["prompt_tokens"] > d["forced"]["usage"]["prompt_tokens"], (nw["usage"], d["forced"]["usage"])
assert nw["usage"]["prompt_tokens"] == ns["usage"]["prompt_tokens"], (nw["usage"], ns["usage"])
a = nw["choices"][0]
assert (a["message"].get("content") or "") == ns["text"] and (a["message"].get("reasoning_content") or "") == ns["reasoning"] \
    and a["finish_reason"] == ns["finish"], (a, ns)
print(f"deepseek4: {prompt_tokens} prompt tokens; reasoning {reasoning[:40]!r}...; round trip "
      f"{nw['usage']['prompt_tokens']} prompt tokens, {nw['usage']['prompt_tokens_details']['cached_tokens']} cached")
PY
stop_server
echo "server deepseek4: ok"
