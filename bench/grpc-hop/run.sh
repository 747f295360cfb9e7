#!/bin/bash
# One pipeline hop's transport cost without ds4 (issue 12): a gRPC round trip on loopback per step, as a unary
# call (ds4's Stage.Forward today) and as one message each way on a long-lived bidirectional stream, with the
# server busy for W microseconds per message (a stage's own compute) and payloads of 8 B to 64 KiB.
#   bash bench/grpc-hop/run.sh [W_US...]        (default: 0 1000 5000)
# Builds with Debian's protoc, grpc_cpp_plugin and libgrpc++ (pkg-config) into a temporary folder.
# HOP_BENCH=PATH: a hop_bench built before (the GPU machine has no protoc: bench/pipeline-h200.sh --pack builds one
# beside ds4 and its gRPC libraries).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); tmp=$(mktemp -d); sp=
trap '[ -n "$sp" ] && kill "$sp" 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$tmp"
if [ -n "${HOP_BENCH:-}" ]; then cp "$HOP_BENCH" hop_bench; else
protoc -I"$here" --cpp_out=. --grpc_out=. --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "$here/hop.proto"
# shellcheck disable=SC2046  # pkg-config's flags are words
g++ -O2 -std=c++17 -I. -o hop_bench "$here/hop_bench.cpp" hop.pb.cc hop.grpc.pb.cc $(pkg-config --cflags --libs grpc++ protobuf)
fi
[ "${HOP_BUILD_ONLY:-}" ] && { cp hop_bench "$HOP_BUILD_ONLY"; exit 0; }
# shellcheck source=tests/integration/free_port.sh
source "$here/../../tests/integration/free_port.sh"
for w in "${@:-0 1000 5000}"; do
  for ww in $w; do for kind in server spinserver; do
    port=$(free_port); ./hop_bench $kind "127.0.0.1:$port" "$ww" & sp=$!; sleep 1
    echo "$kind busy $ww us a message:"
    for b in 8 4096 65536; do ./hop_bench client "127.0.0.1:$port" "$b" "$([ $kind = spinserver ] && echo streams)"; done
    kill "$sp"; wait "$sp" 2>/dev/null || true; sp=
  done; done
done
