#!/usr/bin/env python3
"""Renders chat conversations with real Jinja chat templates, the way Hugging
Face transformers' apply_chat_template(tokenize=False) does: jinja2's
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
loopcontrols, plus the tojson / raise_exception / strftime_now helpers.

Why jinja2 and not @lenml/tokenizers: @lenml/tokenizers 3.7.2 ships an old
Jinja engine that cannot parse the Qwen3 template (no str.split / lstrip /
startswith, no subscript after a call), and jinja2 is the engine the
templates were written for.

stdin:  {"templates": [jinja source, ...],
         "cases": [{"messages": [...], "add_generation_prompt": bool,
                    "enable_thinking": bool, "tools": [...] (optional),
                    "template_kwargs": {...} (optional: more template
                    variables, as chat_template_kwargs)}, ...]}
output (written to argv[1], UTF-8 JSON):
        {"jinja2": version, "results": [[rendered string | {"error": message}
                                          for each case] for each template]}
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def main():
    request = json.load(sys.stdin)
    results = []
    for source in request["templates"]:
        template = compile_template(source)
        rendered = []
        for case in request["cases"]:
            try:
                rendered.append(template.render(
                    messages=case["messages"], tools=case.get("tools"), documents=None,
                    add_generation_prompt=case["add_generation_prompt"],
                    enable_thinking=case["enable_thinking"],
                    **case.get("template_kwargs", {})))
            except Exception as e:  # the C++ side expects an error for these cases
                rendered.append({"error": f"{type(e).__name__}: {e}"})
        results.append(rendered)
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump({"jinja2": jinja2.__version__, "results": results}, out, ensure_ascii=False)


if __name__ == "__main__":
    main()
