// Drives ds4-server's tool support with the official SDKs (npm "openai" and
// "@anthropic-ai/sdk"): a conversation whose history holds two tool calls
// and their results, with the tool offered, sent to /v1/chat/completions
// whole and streamed and to /v1/messages (and count_tokens) in Anthropic's
// shape; then the next turn, which must reuse the first turn's KV prefix;
// and the bad tool inputs the server must refuse. Prints one JSON line for
// the shell test to check.
// usage: node server_tools_client.mjs NODE_MODULES BASE_URL API_KEY CONVERSATION_JSON
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, base, key, conversationJson] = process.argv.slice(2);
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")).href);
const { default: Anthropic } = await import(pathToFileURL(require.resolve("@anthropic-ai/sdk")).href);
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
const { messages, tools } = JSON.parse(conversationJson);
const request = { model: "m", messages, tools, tool_choice: "auto", max_tokens: 6, temperature: 0 };

const whole = await openai.chat.completions.create(request);
// Streamed: the SDK's own accumulator over the chunks.
const stream = openai.beta.chat.completions.stream({ ...request, stream_options: { include_usage: true } });
const streamed = await stream.finalChatCompletion();

// The next turn: the reply as the client got it, then a new question.
const reply = whole.choices[0].message;
const next = { ...request, messages: [...messages, { role: "assistant", content: reply.content ?? "",
                                                      ...(reply.reasoning_content ? { reasoning_content: reply.reasoning_content } : {}),
                                                      ...(reply.tool_calls ? { tool_calls: reply.tool_calls } : {}) },
                                       { role: "user", content: "Thanks. And tomorrow?" }] };
const second = await openai.chat.completions.create(next);

// tool_choice naming the function: the prompt ends with the opening of a
// get_weather call, so the reply (streamed) starts as that call.
const named = { ...request, tool_choice: { type: "function", function: { name: "get_weather" } } };
const forcedWhole = await openai.chat.completions.create(named);
const forcedStreamed = await openai.beta.chat.completions.stream({ ...named, stream_options: { include_usage: true } })
  .finalChatCompletion();

// Anthropic's shape of the same conversation: system on top, tool_use
// blocks on the assistant turn, tool_result blocks in one user turn.
const system = messages[0].content;
const calls = messages[2].tool_calls;
const aMessages = [
  { role: "user", content: messages[1].content },
  { role: "assistant", content: calls.map((c) => ({ type: "tool_use", id: c.id, name: c.function.name, input: JSON.parse(c.function.arguments) })) },
  { role: "user", content: messages.slice(3).map((m) => ({ type: "tool_result", tool_use_id: m.tool_call_id, content: m.content })) },
];
const aTools = tools.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));
const aRequest = { model: "m", system, messages: aMessages, tools: aTools, max_tokens: 6, temperature: 0 };
const aWhole = await anthropic.messages.create(aRequest);
const aStreamed = await anthropic.messages.stream(aRequest).finalMessage();
const aCount = await anthropic.messages.countTokens({ model: "m", system, messages: aMessages, tools: aTools });

// Bad tool input: each refused with a 400 in the API's error shape.
const refusals = [];
const refuse = async (what, fn) => {
  try {
    await fn();
    refusals.push({ what, status: 200 });
  } catch (e) {
    // openai's e.error is the inner error object, Anthropic's the whole body.
    const inner = e.error?.type === "error" ? e.error.error : e.error;
    refusals.push({ what, status: e.status, message: inner?.message ?? null, type: inner?.type ?? null });
  }
};
await refuse("tools not an array", () => openai.chat.completions.create({ ...request, tools: { get_weather: {} } }));
await refuse("a tool without a name", () => openai.chat.completions.create({ ...request, tools: [{ type: "function", function: { parameters: {} } }] }));
await refuse("tool_choice names an unknown function", () =>
  openai.chat.completions.create({ ...request, tool_choice: { type: "function", function: { name: "launch_rocket" } } }));
await refuse("malformed arguments in history", () => openai.chat.completions.create({
  ...request, messages: messages.map((m, i) => (i === 2 ? { ...m, tool_calls: [{ ...m.tool_calls[0], function: { name: "get_weather", arguments: "{\"city\": " } }] } : m)) }));
await refuse("anthropic tools not an array", () => anthropic.messages.create({ ...aRequest, tools: "get_weather" }));
await refuse("anthropic tool without a name", () => anthropic.messages.create({ ...aRequest, tools: [{ input_schema: { type: "object" } }] }));
await refuse("anthropic tool_choice names an unknown tool", () => anthropic.messages.create({ ...aRequest, tool_choice: { type: "tool", name: "launch_rocket" } }));

console.log(JSON.stringify({ whole, streamed, second, forcedWhole, forcedStreamed, aWhole, aStreamed, aCount: aCount.input_tokens, refusals }));
