// Drives ds4-server with the official OpenAI SDK (npm "openai"): a
// non-streaming and a streaming chat completion and a completion, greedy;
// prints one JSON line with their texts and usage for the shell test to check.
// usage: node server_openai_client.mjs NODE_MODULES BASE_URL API_KEY PROMPT
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, base, key, prompt] = process.argv.slice(2);
// The SDK lives in ds4's dependency folder, not beside this script.
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")).href);
const client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0 });
const messages = [{ role: "user", content: prompt }];
const whole = await client.chat.completions.create({ model: "m", messages, max_tokens: 12, temperature: 0 });
let streamed = "";
let finish = null;
let usage = null;
const stream = await client.chat.completions.create({
  model: "m", messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    streamed += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
}
const completion = await client.completions.create({ model: "m", prompt, max_tokens: 6, temperature: 0 });
let refused = null;
try {
  await client.chat.completions.create({ model: "m", messages: [], max_tokens: 1 });
} catch (e) {
  refused = { status: e.status, message: e.message };
}
console.log(JSON.stringify({
  whole: whole.choices[0].message.content, whole_finish: whole.choices[0].finish_reason, whole_usage: whole.usage,
  streamed, finish, usage, completion: completion.choices[0].text, refused,
}));
