// Replays Server-Sent Events that ds4-server's response classes wrote to
// the official SDKs' streaming helpers, which accumulate the deltas into a
// final message the way applications consume them: openai's
// beta.chat.completions.stream().finalChatCompletion(),
// responses.stream().finalResponse() and @anthropic-ai/sdk's
// messages.stream().finalMessage(). A loopback HTTP server answers each
// SDK's POST with the recorded stream.
// usage: node server_tool_stream_sdk.mjs NODE_MODULES OPENAI_SSE_FILE ANTHROPIC_SSE_FILE RESPONSES_SSE_FILE
// stdout: {"openai": final chat completion, "anthropic": final message,
//          "responses": {"final": final response, "accumulated": {output index: the
//          SDK's own accumulation of that item's text or arguments}}}
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, openaiFile, anthropicFile, responsesFile] = process.argv.slice(2);
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")).href);
const { default: Anthropic } = await import(pathToFileURL(require.resolve("@anthropic-ai/sdk")).href);
const recorded = { "/v1/chat/completions": readFileSync(openaiFile), "/v1/messages": readFileSync(anthropicFile),
                   "/v1/responses": readFileSync(responsesFile) };

const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const body = recorded[req.url];
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
    res.end(body);
  });
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const base = `http://127.0.0.1:${server.address().port}`;
try {
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "k", maxRetries: 0 });
  const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }];
  const o = await openai.beta.chat.completions
    .stream({ model: "m", messages: [{ role: "user", content: "q" }], tools })
    .finalChatCompletion();
  const anthropic = new Anthropic({ baseURL: base, apiKey: "k", maxRetries: 0 });
  const a = await anthropic.messages
    .stream({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "q" }],
              tools: [{ name: "get_weather", input_schema: { type: "object" } }] })
    .finalMessage();
  // The Responses helper; each delta event carries the SDK's snapshot of
  // the item's text or arguments so far.
  const accumulated = {};
  const rs = openai.responses.stream({ model: "m", input: "q",
                                       tools: [{ type: "function", name: "get_weather", parameters: { type: "object" }, strict: false }] });
  rs.on("response.output_text.delta", (e) => { accumulated[e.output_index] = e.snapshot; });
  rs.on("response.function_call_arguments.delta", (e) => { accumulated[e.output_index] = e.snapshot; });
  const r = await rs.finalResponse();
  console.log(JSON.stringify({ openai: o, anthropic: a, responses: { final: r, accumulated } }));
} finally {
  server.close();
}
