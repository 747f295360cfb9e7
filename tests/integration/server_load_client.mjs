// Loads ds4-server with concurrent clients of the official OpenAI SDK (npm
// "openai") for a bounded time: a mix of whole and streamed chat
// completions (raw streams and the SDK's ChatCompletionStream helper),
// whole and streamed text completions, and streams the client aborts with
// an AbortController after their first pieces. Every prompt is greedy and
// comes from a small set whose replies were read alone first, so under
// load each reply that is not aborted must be exactly its prompt's reply
// alone, with the same usage. Prints one JSON object for the shell test:
// what was sent and received, the problems found (each one line saying
// what was expected), and the server's VmRSS after the warm-up and at the
// end.
// usage: node server_load_client.mjs NODE_MODULES BASE_URL API_KEY SERVER_PID CLIENTS WARMUP_S LOAD_S
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, base, key, pidArg, clientsArg, warmupArg, loadArg] = process.argv.slice(2);
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")).href);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 120000 });

const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pidArg}/status`, "utf8"))[1]) * 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const problems = [];
const problem = (what) => { if (problems.length < 50) problems.push(what); };
// What the server was sent, for /metrics: requests by endpoint, prompt
// tokens of every generation, generated tokens of the whole ones.
const sent = { chat: 0, completions: 0, aborted: 0, promptTokens: 0, completionTokens: 0, errors: 0 };

const topics = ["the sea", "rivers", "the sky", "ten numbers", "a mountain", "winter", "a city at night", "bread"];
const MAX = [3, 6, 10];
const cases = [];
for (let i = 0; i < topics.length; i++) {
  cases.push({ chat: true, body: { model: "m", messages: [{ role: "user", content: `Tell me about ${topics[i]}.` }],
                                   max_tokens: MAX[i % 3], temperature: 0 } });
  cases.push({ chat: false, body: { model: "m", prompt: `A short note on ${topics[i]}:`, max_tokens: MAX[(i + 1) % 3],
                                    temperature: 0 } });
}

function checkUsage(what, usage, ref) {
  if (!usage) return problem(`${what}: expected usage, got none`);
  if (usage.prompt_tokens !== ref.usage.prompt_tokens || usage.completion_tokens !== ref.usage.completion_tokens ||
      usage.total_tokens !== usage.prompt_tokens + usage.completion_tokens)
    problem(`${what}: expected usage ${JSON.stringify(ref.usage)} (prompt + completion = total), got ${JSON.stringify(usage)}`);
}

function checkFinish(what, finish, ref) {
  if (finish !== ref.finish) problem(`${what}: expected finish_reason ${ref.finish}, got ${finish}`);
}

// The replies alone, read one at a time before any load.
for (const c of cases) {
  const r = c.chat ? await client.chat.completions.create(c.body) : await client.completions.create(c.body);
  const ch = r.choices[0];
  c.ref = { text: c.chat ? ch.message.content : ch.text, finish: ch.finish_reason, usage: r.usage };
  sent[c.chat ? "chat" : "completions"] += 1;
  sent.promptTokens += r.usage.prompt_tokens;
  sent.completionTokens += r.usage.completion_tokens;
  if (!["stop", "length"].includes(ch.finish_reason) ||
      (ch.finish_reason === "length" && r.usage.completion_tokens !== c.body.max_tokens))
    problem(`reference ${JSON.stringify(c.body).slice(0, 80)}: expected finish stop, or length at max_tokens, got ` +
            `${ch.finish_reason} with ${r.usage.completion_tokens} tokens`);
}

async function one(c, kind, what) {
  const ref = c.ref;
  sent[c.chat ? "chat" : "completions"] += 1;
  sent.promptTokens += ref.usage.prompt_tokens;
  if (kind === "whole") {
    const r = c.chat ? await client.chat.completions.create(c.body) : await client.completions.create(c.body);
    const ch = r.choices[0];
    const text = c.chat ? ch.message.content : ch.text;
    if (text !== ref.text) problem(`${what}: expected the text alone ${JSON.stringify(ref.text)}, got ${JSON.stringify(text)}`);
    checkFinish(what, ch.finish_reason, ref);
    checkUsage(what, r.usage, ref);
    sent.completionTokens += r.usage.completion_tokens;
    return;
  }
  if (kind === "helper") {  // the SDK's own accumulation against the deltas it emitted
    const s = client.beta.chat.completions.stream({ ...c.body, stream_options: { include_usage: true } });
    let deltas = "";
    s.on("content", (delta) => { deltas += delta; });
    const final = await s.finalChatCompletion();
    const text = final.choices[0].message.content ?? "";
    if (text !== deltas || text !== ref.text)
      problem(`${what}: expected the SDK's accumulated text = its deltas = the text alone ${JSON.stringify(ref.text)}, ` +
              `got ${JSON.stringify(text)} and deltas ${JSON.stringify(deltas)}`);
    checkFinish(what, final.choices[0].finish_reason, ref);
    checkUsage(what, final.usage, ref);
    sent.completionTokens += ref.usage.completion_tokens;
    return;
  }
  const abort = kind === "abort" ? new AbortController() : null;
  const body = { ...c.body, stream: true, stream_options: { include_usage: true } };
  const stream = c.chat ? await client.chat.completions.create(body, abort ? { signal: abort.signal } : {})
                        : await client.completions.create(body, abort ? { signal: abort.signal } : {});
  let text = "", finish = null, usage = null, pieces = 0, after = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.usage) {
        if (usage) problem(`${what}: expected one usage chunk, got two`);
        usage = chunk.usage;
      }
      for (const ch of chunk.choices) {
        const piece = c.chat ? ch.delta?.content ?? "" : ch.text ?? "";
        text += piece;
        pieces += 1;
        if (finish) after += 1;
        if (ch.finish_reason) finish = ch.finish_reason;
      }
      if (abort && pieces >= 1) { abort.abort(); }
    }
  } catch (e) {
    if (!abort?.signal.aborted) throw e;
  }
  // The SDK ends the iteration (or throws APIUserAbortError) once aborted.
  if (abort?.signal.aborted) { sent.aborted += 1; return; }
  // An abort that came too late (the stream had ended) leaves a whole
  // reply, checked as one.
  if (after) problem(`${what}: expected nothing after the finish_reason, got ${after} more choices`);
  if (text !== ref.text) problem(`${what}: expected the concatenated deltas to be the text alone ${JSON.stringify(ref.text)}, got ${JSON.stringify(text)}`);
  checkFinish(what, finish, ref);
  checkUsage(what, usage, ref);
  sent.completionTokens += usage ? usage.completion_tokens : 0;
}

const kinds = ["whole", "whole", "stream", "stream", "helper", "abort"];
let stopAt = 0, n = 0;
async function worker(id) {
  while (Date.now() < stopAt) {
    const c = cases[(id * 7 + n++) % cases.length];
    let kind = kinds[(id + n) % kinds.length];
    if (kind === "helper" && !c.chat) kind = "stream";
    const what = `client ${id} ${kind} ${c.chat ? "chat" : "completion"} #${n}`;
    try {
      await one(c, kind, what);
    } catch (e) {
      sent.errors += 1;
      problem(`${what}: expected a reply, got ${e?.status ?? ""} ${e?.name}: ${String(e?.message).slice(0, 200)}`);
      await sleep(100);
    }
  }
}

async function phase(seconds) {
  stopAt = Date.now() + seconds * 1000;
  await Promise.all(Array.from({ length: Number(clientsArg) }, (_, i) => worker(i)));
}

const t0 = Date.now();
await phase(Number(warmupArg));
const warm = rss();
const warmSent = { ...sent };
await phase(Number(loadArg));
const loadSeconds = (Date.now() - t0) / 1000 - Number(warmupArg);
await sleep(500);
console.log(JSON.stringify({ sent, warmSent, problems, rssWarm: warm, rssEnd: rss(), loadSeconds,
                             first: { body: cases[0].body, text: cases[0].ref.text } }));
