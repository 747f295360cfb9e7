#!/usr/bin/env bash
# The engine (src/engine) is the only API programs see: no program and no
# integration test includes a backend's own header or asks the preprocessor
# whether CUDA is built in. The backend factory (src/engine/backend_factory)
# is the one place that names the CUDA backend.
set -euo pipefail
src=${DS4_SOURCE_DIR:?}
fail() { echo "FAIL: $*" >&2; exit 1; }

hits=$(grep -rnE '#include[[:space:]]*"backend/cuda/|#if(def|ndef)?[[:space:]].*DS4_HAVE_CUDA' "$src/tools" "$src/tests/integration" \
  --include='*.cpp' --include='*.h' --include='*.sh' | grep -v 'test_engine_boundary.sh' || true)
[[ -z "$hits" ]] || fail "programs reach past the engine:"$'\n'"$hits"

# The check itself finds what it looks for.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tools/x"
printf '#include "backend/cuda/cuda_backend.h"\n' > "$tmp/tools/x/a.cpp"
grep -rqE '#include[[:space:]]*"backend/cuda/' "$tmp/tools" || fail "the pattern misses a backend/cuda include"
factory_hits=$(grep -lE 'backend/cuda/' "$src"/src/engine/*.cpp "$src"/src/engine/*.h | xargs -n1 basename | sort -u | tr '\n' ' ')
[[ "$factory_hits" == "backend_factory.cpp " ]] || fail "only backend_factory.cpp in src/engine may name the CUDA backend, found: $factory_hits"
echo ok
