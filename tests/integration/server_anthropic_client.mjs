// Drives ds4-server with the official Anthropic SDK (npm "@anthropic-ai/sdk"):
// a whole message, the raw event stream of a streamed one, the SDK's own
// stream accumulator, count_tokens for the same conversation, and a
// request the server must refuse; prints one JSON line for the shell test
// to check against the OpenAI endpoint and the usage numbers.
// usage: node server_anthropic_client.mjs NODE_MODULES BASE_URL API_KEY PROMPT MAX_TOKENS [EXTRA_PARAMS_JSON]
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, base, key, prompt, maxTokens, extraJson] = process.argv.slice(2);
// The SDK lives in ds4's dependency folder, not beside this script.
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: Anthropic } = await import(pathToFileURL(require.resolve("@anthropic-ai/sdk")).href);
// The SDK adds /v1/messages to the base URL itself.
const client = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
const extra = extraJson ? JSON.parse(extraJson) : {};
const request = {
  model: "m", max_tokens: Number(maxTokens), temperature: 0,
  messages: [{ role: "user", content: prompt }], ...extra,
};

const whole = await client.messages.create(request);

// The raw events, in order, as the SDK parses the Server-Sent Events.
const events = [];
let text = "", thinking = "", startUsage = null, deltaUsage = null, stopReason = null, stopSequence = null;
const raw = await client.messages.create({ ...request, stream: true });
for await (const ev of raw) {
  events.push(ev.type);
  if (ev.type === "message_start") startUsage = ev.message.usage;
  if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
  if (ev.type === "content_block_delta" && ev.delta.type === "thinking_delta") thinking += ev.delta.thinking;
  if (ev.type === "message_delta") {
    deltaUsage = ev.usage;
    stopReason = ev.delta.stop_reason;
    stopSequence = ev.delta.stop_sequence;
  }
}
// The SDK's accumulator over the same stream.
const accumulated = await client.messages.stream(request).finalMessage();

const countParams = { model: request.model, messages: request.messages };
for (const k of ["system", "thinking"]) if (request[k] !== undefined) countParams[k] = request[k];
const count = await client.messages.countTokens(countParams);

let refused = null;
try {
  await client.messages.create({ model: "m", max_tokens: 4, messages: [] });
} catch (e) {
  refused = { status: e.status, body: e.error };
}
console.log(JSON.stringify({
  whole, streamed: { events, text, thinking, startUsage, deltaUsage, stopReason, stopSequence },
  accumulated, count: count.input_tokens, refused,
}));
