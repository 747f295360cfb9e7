// Tool-calling turns end to end with the official SDKs (npm "openai",
// "@anthropic-ai/sdk"), on a model that writes a call of its own: for chat
// completions, the Responses API and Anthropic's messages, the first turn
// (the model calls `ping`), then the next turn as an agent sends it (the
// reply as returned, the call's result); and, on chat, the same next turn
// with the call's id changed (the memory cannot know it: the template
// spells the call its own way). Prints one JSON object.
// usage: node server_tool_memory_client.mjs NODE_MODULES BASE_URL API_KEY
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, base, key] = process.argv.slice(2);
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")).href);
const { default: Anthropic } = await import(pathToFileURL(require.resolve("@anthropic-ai/sdk")).href);
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });

const question = "Are you there?";
const parameters = { type: "object", properties: {} };
const settings = { model: "m", temperature: 0 };

// Chat completions.
const chatTools = [{ type: "function", function: { name: "ping", description: "Checks the line.", parameters } }];
const chatFirst = await openai.chat.completions.create({ ...settings, max_tokens: 32, tools: chatTools,
                                                         messages: [{ role: "user", content: question }] });
const call = chatFirst.choices[0].message;
const chatNextTurn = (reply) => openai.chat.completions.create({ ...settings, max_tokens: 2, tools: chatTools, messages: [
  { role: "user", content: question }, reply,
  ...(reply.tool_calls ?? []).map((c) => ({ role: "tool", tool_call_id: c.id, content: "pong" }))] });
const chatNext = await chatNextTurn(call);
const renamed = { ...call, tool_calls: (call.tool_calls ?? []).map((c) => ({ ...c, id: "call_renamed" })) };
const chatUnknown = await chatNextTurn(renamed);

// The Responses API: the first response's output sent back as input.
const respTools = [{ type: "function", name: "ping", description: "Checks the line.", parameters }];
const respFirst = await openai.responses.create({ ...settings, max_output_tokens: 32, tools: respTools, input: question });
const respNext = await openai.responses.create({ ...settings, max_output_tokens: 2, tools: respTools, input: [
  { role: "user", content: question }, ...respFirst.output,
  ...respFirst.output.filter((o) => o.type === "function_call")
    .map((o) => ({ type: "function_call_output", call_id: o.call_id, output: "pong" }))] });

// Anthropic's messages, thinking on as the chat template's default is (off,
// Qwen3's template writes an empty reasoning block in the prompt that it
// leaves out when it renders the turn again).
const aTools = [{ name: "ping", description: "Checks the line.", input_schema: parameters }];
const aSettings = { ...settings, tools: aTools, thinking: { type: "enabled", budget_tokens: 1024 } };
const aFirst = await anthropic.messages.create({ ...aSettings, max_tokens: 32, messages: [{ role: "user", content: question }] });
const aNext = await anthropic.messages.create({ ...aSettings, max_tokens: 2, messages: [
  { role: "user", content: question }, { role: "assistant", content: aFirst.content },
  { role: "user", content: aFirst.content.filter((b) => b.type === "tool_use")
      .map((b) => ({ type: "tool_result", tool_use_id: b.id, content: "pong" })) }] });

console.log(JSON.stringify({ chatFirst, chatNext, chatUnknown, respFirst, respNext, aFirst, aNext }));
