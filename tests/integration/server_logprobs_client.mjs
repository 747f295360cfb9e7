// Asks ds4-server for log probabilities through the official OpenAI SDK:
// a greedy chat completion with logprobs + top_logprobs, whole and
// streamed; the same prompt as a text completion (the chat template's text
// written out), whole and streamed; a sampled chat completion; the
// Responses API's output_text logprobs for the same conversation, whole
// and streamed, asked for and not; and bad logprob parameters. Prints one JSON object for the shell test to check.
// usage: node server_logprobs_client.mjs NODE_MODULES BASE_URL API_KEY PROMPT RAW_PROMPT_JSON MAX_TOKENS TOP
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, base, key, prompt, rawJson, maxTokensArg, topArg] = process.argv.slice(2);
const raw = JSON.parse(rawJson);
const maxTokens = Number(maxTokensArg), top = Number(topArg);
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")).href);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });

const chatRequest = { model: "m", messages: [{ role: "user", content: prompt }], reasoning_effort: "none",
                      max_tokens: maxTokens, temperature: 0, logprobs: true, top_logprobs: top };
const chat = await client.chat.completions.create(chatRequest);
const chatStream = { text: "", content: [], chunks: 0 };
for await (const c of await client.chat.completions.create({ ...chatRequest, stream: true })) {
  const choice = c.choices[0];
  if (!choice) continue;
  chatStream.text += choice.delta?.content ?? "";
  if (choice.logprobs?.content) {
    chatStream.content.push(...choice.logprobs.content);
    chatStream.chunks += 1;
  }
}

const completionRequest = { model: "m", prompt: raw, max_tokens: maxTokens, temperature: 0, logprobs: top };
const completion = await client.completions.create(completionRequest);
const completionStream = { text: "", tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
for await (const c of await client.completions.create({ ...completionRequest, stream: true })) {
  const choice = c.choices[0];
  completionStream.text += choice.text;
  for (const k of ["tokens", "token_logprobs", "top_logprobs", "text_offset"])
    completionStream[k].push(...(choice.logprobs?.[k] ?? []));
}

const sampled = await client.chat.completions.create({ ...chatRequest, temperature: 1.5, seed: 7, top_logprobs: 3 });

// The Responses API on the same conversation (reasoning.effort "none" is
// chat's reasoning_effort "none"): whole, streamed (every event kept), and
// without `include` (then every logprobs array is empty).
const responsesRequest = { model: "m", input: prompt, reasoning: { effort: "none" }, max_output_tokens: maxTokens,
                           temperature: 0, include: ["message.output_text.logprobs"], top_logprobs: top };
const responses = await client.responses.create(responsesRequest);
const responsesEvents = [];
for await (const e of await client.responses.create({ ...responsesRequest, stream: true })) responsesEvents.push(e);
const { include, ...unasked } = responsesRequest;
const responsesUnasked = await client.responses.create(unasked);
const responsesUnaskedEvents = [];
for await (const e of await client.responses.create({ ...unasked, stream: true })) responsesUnaskedEvents.push(e);

const refusals = [];
const refuse = async (what, fn) => {
  try {
    await fn();
    refusals.push({ what, status: 200 });
  } catch (e) {
    refusals.push({ what, status: e.status, type: e.error?.type ?? null, param: e.error?.param ?? null,
                    message: e.error?.message ?? null });
  }
};
const base1 = { model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 1 };
await refuse("top_logprobs 21", () => client.chat.completions.create({ ...base1, logprobs: true, top_logprobs: 21 }));
await refuse("top_logprobs -1", () => client.chat.completions.create({ ...base1, logprobs: true, top_logprobs: -1 }));
await refuse("top_logprobs without logprobs", () => client.chat.completions.create({ ...base1, top_logprobs: 2 }));
await refuse("logprobs as a string", () => client.chat.completions.create({ ...base1, logprobs: "yes" }));
await refuse("completions logprobs 21", () => client.completions.create({ model: "m", prompt: "x", max_tokens: 1, logprobs: 21 }));
await refuse("completions logprobs true", () => client.completions.create({ model: "m", prompt: "x", max_tokens: 1, logprobs: true }));
const base2 = { model: "m", input: "x", max_output_tokens: 1, include: ["message.output_text.logprobs"] };
await refuse("responses top_logprobs 21", () => client.responses.create({ ...base2, top_logprobs: 21 }));
await refuse("responses top_logprobs as a string", () => client.responses.create({ ...base2, top_logprobs: "5" }));
await refuse("responses include not a list", () => client.responses.create({ ...base2, include: "message.output_text.logprobs" }));

console.log(JSON.stringify({ chat, chatStream, completion, completionStream, sampled, responses, responsesEvents,
                              responsesUnasked, responsesUnaskedEvents, refusals }));
