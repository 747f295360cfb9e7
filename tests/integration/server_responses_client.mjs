// Drives ds4-server's /v1/responses with the official OpenAI SDK (npm
// "openai", client.responses) beside /v1/chat/completions for the same
// conversations, greedy: a whole response, the raw event stream, the SDK's
// stream helper (finalResponse), the same input as typed items, a forced
// tool call (whole and streamed), a tool round trip (a function_call item
// and its function_call_output, as an agent sends them back) against the
// chat endpoint's tool_calls + tool message, the next turn sent as the
// first input plus the response's output, and bad requests. Prints one
// JSON object for the shell test to check.
// usage: node server_responses_client.mjs NODE_MODULES BASE_URL API_KEY PROMPT MAX_TOKENS
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, base, key, prompt, maxTokensArg] = process.argv.slice(2);
const maxTokens = Number(maxTokensArg);
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")).href);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });

const instructions = "Be brief.";
const request = { model: "m", instructions, input: prompt, max_output_tokens: maxTokens, temperature: 0 };
const chat = (messages, extra = {}) =>
  client.chat.completions.create({ model: "m", messages, max_tokens: maxTokens, temperature: 0, ...extra });

const whole = await client.responses.create(request);
const chatWhole = await chat([{ role: "system", content: instructions }, { role: "user", content: prompt }]);

// The raw events as the SDK's iterator yields them.
const events = [];
for await (const e of await client.responses.create({ ...request, stream: true })) events.push(e);
// The SDK's accumulator.
const accumulated = await client.responses.stream(request).finalResponse();
// The same conversation as typed items with text parts.
const items = await client.responses.create({
  ...request,
  input: [{ type: "message", role: "user", content: [{ type: "input_text", text: prompt }] }],
});

// Tools. A named tool_choice: the prompt ends with the opening of the call,
// so the stream announces it at once.
const tools = [{ type: "function", name: "get_weather", description: "Current weather for a city.", strict: false,
                 parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
const chatTools = tools.map(({ name, description, strict, parameters }) =>
  ({ type: "function", function: { name, description, strict, parameters } }));
const question = "Weather in Paris?";
const forcedRequest = { ...request, input: question, tools, tool_choice: { type: "function", name: "get_weather" } };
const forcedWhole = await client.responses.create(forcedRequest);
const forcedEvents = [];
for await (const e of await client.responses.create({ ...forcedRequest, stream: true })) forcedEvents.push(e);
const chatForced = await chat([{ role: "system", content: instructions }, { role: "user", content: question }],
                              { tools: chatTools, tool_choice: { type: "function", function: { name: "get_weather" } } });

// The round trip: the calls the forced reply made when the random model
// closed one, else the call an agent would have gotten; their outputs; the
// next reply. The chat endpoint gets the same conversation in its shape.
const calls = forcedWhole.output.filter((o) => o.type === "function_call");
const roundCalls = calls.length ? calls
  : [{ type: "function_call", call_id: "call_paris", name: "get_weather", arguments: "{\"city\": \"Paris\"}" }];
const roundInput = [{ role: "user", content: question }, ...(calls.length ? forcedWhole.output : roundCalls),
                    ...roundCalls.map((c) => ({ type: "function_call_output", call_id: c.call_id, output: "18 C, sunny" }))];
const round = await client.responses.create({ ...request, input: roundInput, tools });
const assistantText = calls.length ? forcedWhole.output.filter((o) => o.type === "message")
  .map((m) => m.content.map((p) => p.text).join("")).join("") : "";
const chatRound = await chat([
  { role: "system", content: instructions }, { role: "user", content: question },
  { role: "assistant", content: assistantText,
    tool_calls: roundCalls.map((c) => ({ id: c.call_id, type: "function", function: { name: c.name, arguments: c.arguments } })) },
  ...roundCalls.map((c) => ({ role: "tool", tool_call_id: c.call_id, content: "18 C, sunny" })),
], { tools: chatTools });

// The next turn, stateless: the first input, the response's output, a new
// question. Its prompt starts with the first one, so the slot's KV is reused.
const first = await client.responses.create({ ...request, input: [{ role: "user", content: prompt }] });
const next = await client.responses.create({
  ...request, input: [{ role: "user", content: prompt }, ...first.output, { role: "user", content: "And then?" }] });

// Bad requests: 400, one sentence, OpenAI's error shape.
const refusals = [];
const refuse = async (what, body) => {
  try {
    await client.responses.create({ model: "m", ...body });
    refusals.push({ what, status: 200 });
  } catch (e) {
    refusals.push({ what, status: e.status, type: e.error?.type ?? null, param: e.error?.param ?? null,
                    message: e.error?.message ?? null });
  }
};
await refuse("no input", {});
await refuse("a number as input", { input: 7 });
await refuse("an unknown role", { input: [{ role: "robot", content: "x" }] });
await refuse("an image part", { input: [{ role: "user", content: [{ type: "input_image", image_url: "http://x/y.png" }] }] });
await refuse("a hosted tool", { input: "x", tools: [{ type: "web_search_preview" }] });
await refuse("previous_response_id", { input: "x", previous_response_id: "resp_123" });
await refuse("max_output_tokens 0", { input: "x", max_output_tokens: 0 });
await refuse("temperature as a string", { input: "x", temperature: "hot" });
await refuse("a call without call_id", { input: [{ type: "function_call", name: "f", arguments: "{}" }] });
await refuse("an input the context cannot hold", { input: "word ".repeat(3000) });

console.log(JSON.stringify({ whole, chatWhole, events, accumulated, items, forcedWhole, forcedEvents, chatForced,
                             round, chatRound, roundWasModels: calls.length > 0, first, next, refusals }));
