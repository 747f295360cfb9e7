// Renders chat conversations with real Jinja chat templates using
// @huggingface/jinja (the Jinja engine of Hugging Face transformers.js), the
// npm reference for ds4's chat renderers.
// Usage: node chat_render_hf_jinja.mjs <node_modules dir>
// stdin:  {"templates": [jinja source, ...],
//          "cases": [{"messages": [...], ...any other template variables}, ...]}
//         Each case's keys become the template's variables as given, so a key
//         that is absent stays undefined ("is defined" is false), exactly as
//         when a caller leaves it out.
// stdout: {"version": "...", "results": [[rendered string | {"error": message}
//                                         for each case] for each template]}
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules] = process.argv.slice(2);
if (!nodeModules) {
  console.error("usage: node chat_render_hf_jinja.mjs <node_modules dir>");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(nodeModules), "noop.js"));
const { Template } = await import(pathToFileURL(require.resolve("@huggingface/jinja")).href);
const version = JSON.parse(readFileSync(path.join(path.resolve(nodeModules), "@huggingface/jinja/package.json"), "utf8")).version;

const request = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const source of request.templates) {
  const template = new Template(source);
  const rendered = [];
  for (const variables of request.cases) {
    try {
      rendered.push(template.render(variables));
    } catch (e) {
      rendered.push({ error: String(e && e.message ? e.message : e) });
    }
  }
  results.push(rendered);
}
process.stdout.write(JSON.stringify({ version, results }));
