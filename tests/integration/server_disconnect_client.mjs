// Clients that give up on a whole (non-streamed) reply: for each API, the
// official SDK (npm "openai", "@anthropic-ai/sdk") asks for a reply as long
// as the context allows, with the SDK's own `timeout` of 0.5 s, which
// aborts the request and closes its connection. Then, from /metrics: how
// long until the slot was free and the generation counted, that the decode
// work stopped growing, the tokens the cancelled generation wrote; and how
// long the next request (on the one slot) took. Prints one JSON object.
// usage: node server_disconnect_client.mjs NODE_MODULES BASE_URL API_KEY ENDPOINTS(comma-separated)
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, base, key, endpointsArg] = process.argv.slice(2);
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")).href);
const { default: Anthropic } = await import(pathToFileURL(require.resolve("@anthropic-ai/sdk")).href);
const giveUp = { timeout: 500, maxRetries: 0 };
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, ...giveUp });
const anthropic = new Anthropic({ baseURL: base, apiKey: key, ...giveUp });
const patient = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });

const long = 1 << 20;  // clamped to what the context holds
const content = "Tell me everything about the sea, at length.";
// ignore_eos (llama.cpp's and vLLM's extension, sent as an extra body field):
// a random-weight model can sample an end token within the first few, and
// the reply would end before the client gives up (seen: 3 tokens in 63 ms).
const go = { temperature: 0, ignore_eos: true };
const requests = {
  chat: () => openai.chat.completions.create({ model: "m", messages: [{ role: "user", content }], max_tokens: long,
                                              ...go }),
  completions: () => openai.completions.create({ model: "m", prompt: content, max_tokens: long, ...go }),
  responses: () => openai.responses.create({ model: "m", input: content, max_output_tokens: long, ...go }),
  messages: () => anthropic.messages.create({ model: "m", messages: [{ role: "user", content }], max_tokens: long,
                                             ...go }),
};

async function metrics() {
  const r = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${key}` } });
  const text = await r.text();
  const value = (name) => Number((text.match(new RegExp(`^${name} (\\S+)$`, "m")) ?? [])[1]);
  return { slots: value("ds4_kv_slots_in_use"), generations: value("ds4_generations_total"),
           generated: value("ds4_generated_tokens_total"), decode: value("ds4_decode_tokens_total"),
           status499: (text.match(/ds4_requests_total\{endpoint="[^"]+",status="499"\} (\d+)/g) ?? [])
             .reduce((n, line) => n + Number(line.split(" ").pop()), 0) };
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const results = [];
for (const endpoint of endpointsArg.split(",")) {
  const before = await metrics();
  const t0 = performance.now();
  let error = null;
  try {
    await requests[endpoint]();
  } catch (e) {
    error = e.constructor.name;
  }
  const gaveUp = performance.now();
  // The slot is free and the generation counted (polled every 20 ms, for
  // at most 10 s); then the request, once its handler has returned.
  let after = await metrics();
  while ((after.slots !== 0 || after.generations <= before.generations) && performance.now() - gaveUp < 10000) {
    await sleep(20);
    after = await metrics();
  }
  const freedAfter = performance.now() - gaveUp;
  while (after.status499 <= before.status499 && performance.now() - gaveUp < 10000) {
    await sleep(20);
    after = { ...after, status499: (await metrics()).status499 };
  }
  await sleep(300);
  const later = await metrics();
  const t1 = performance.now();
  const next = await patient.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Hi." }],
                                                      max_tokens: 2, temperature: 0 });
  results.push({ endpoint, error, gaveUpAfter: gaveUp - t0, freedAfter, slots: after.slots,
                 generationsBefore: before.generations, generationsAfter: after.generations,
                 generated: after.generated - before.generated, decodeGrew: later.decode - after.decode,
                 status499: after.status499 - before.status499,
                 nextMs: performance.now() - t1, nextFinish: next.choices[0].finish_reason });
}
console.log(JSON.stringify(results));
