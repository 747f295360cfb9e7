// Drives ds4-server on a DeepSeek V4 model with the official SDKs (npm
// "openai", "@anthropic-ai/sdk"), greedy, one prompt: chat completions
// whole and streamed with thinking on (the template's default: the reply
// opens in reasoning) and off (reasoning_effort "none"); the same
// conversation's reasoning as each API returns it apart (the Responses
// API's reasoning item, Anthropic's thinking block, chat's
// reasoning_content when tools are offered); and a tool round trip in
// DSML: a named tool_choice (the prompt ends with the opening of a DSML
// invoke, so the stream announces the call at once), then the next turn
// with the call and its result, whole and streamed. Prints one JSON object.
// usage: node server_deepseek4_client.mjs NODE_MODULES BASE_URL API_KEY PROMPT MAX_TOKENS
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, base, key, prompt, maxTokensArg] = process.argv.slice(2);
const maxTokens = Number(maxTokensArg);
const require = createRequire(path.join(nodeModules, "noop.js"));
const { default: OpenAI } = await import(pathToFileURL(require.resolve("openai")).href);
const { default: Anthropic } = await import(pathToFileURL(require.resolve("@anthropic-ai/sdk")).href);
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });

const messages = [{ role: "user", content: prompt }];
const chat = { model: "m", messages, max_tokens: maxTokens, temperature: 0 };
const streamText = async (request) => {
  let text = "", reasoning = "", finish = null, usage = null;
  for await (const c of await openai.chat.completions.create({ ...request, stream: true,
                                                               stream_options: { include_usage: true } })) {
    if (c.usage) usage = c.usage;
    const choice = c.choices[0];
    if (!choice) continue;
    text += choice.delta?.content ?? "";
    reasoning += choice.delta?.reasoning_content ?? "";
    finish = choice.finish_reason ?? finish;
  }
  return { text, reasoning, finish, usage };
};

const thinking = await openai.chat.completions.create(chat);
const thinkingStream = await streamText(chat);
const noThinking = await openai.chat.completions.create({ ...chat, reasoning_effort: "none" });
const noThinkingStream = await streamText({ ...chat, reasoning_effort: "none" });

// The reasoning, returned apart.
const responses = await openai.responses.create({ model: "m", input: prompt, max_output_tokens: maxTokens, temperature: 0 });
const claude = await anthropic.messages.create({ model: "m", messages, max_tokens: maxTokens, temperature: 0,
                                                 thinking: { type: "enabled", budget_tokens: 1024 } });
const claudeStream = await anthropic.messages.stream({ model: "m", messages, max_tokens: maxTokens, temperature: 0,
                                                       thinking: { type: "enabled", budget_tokens: 1024 } }).finalMessage();
const tools = [{ type: "function", function: { name: "get_weather", description: "Current weather for a city.",
                 parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const withTools = await openai.chat.completions.create({ ...chat, tools });
const withToolsStream = await streamText({ ...chat, tools });

// The DSML round trip.
const named = { ...chat, tools, tool_choice: { type: "function", function: { name: "get_weather" } } };
const forced = await openai.chat.completions.create(named);
const forcedStream = await openai.beta.chat.completions.stream({ ...named, stream_options: { include_usage: true } })
  .finalChatCompletion();
// The call the model made when the random model closed it, else the call an
// agent would have gotten.
const reply = forced.choices[0].message;
const calls = reply.tool_calls?.length ? reply.tool_calls
  : [{ id: "call_paris", type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }];
const round = { ...chat, tools, messages: [...messages,
  { role: "assistant", content: reply.tool_calls?.length ? reply.content ?? "" : "", tool_calls: calls,
    ...(reply.reasoning_content ? { reasoning_content: reply.reasoning_content } : {}) },
  ...calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: "18 C, sunny" }))] };
const next = await openai.chat.completions.create(round);
// (The SDK's stream accumulator keeps only the last piece of a field it
// does not know, such as reasoning_content: the chunks are added up here.)
const nextStream = await streamText(round);

console.log(JSON.stringify({ thinking, thinkingStream, noThinking, noThinkingStream, responses, claude, claudeStream,
                              withTools, withToolsStream, forced, forcedStream, next, nextStream }));
