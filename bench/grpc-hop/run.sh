#!/bin/bash
# One pipeline hop's transport cost without ds4 (issue 12): a gRPC round trip on loopback per step, as a unary
# call (ds4's Stage.Forward today) and as one message each way on a long-lived bidirectional stream, with the
# server busy for W microseconds per message (a stage's own compute) and payloads of 8 B to 64 KiB.
#   bash bench/grpc-hop/run.sh [W_US...]        (default: 0 1000 5000)
# Builds with Debian's protoc, grpc_cpp_plugin and libgrpc++ (pkg-config) into a temporary folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); tmp=$(mktemp -d); sp=
trap '[ -n "$sp" ] && kill "$sp" 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$tmp"
protoc -I"$here" --cpp_out=. --grpc_out=. --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "$here/hop.proto"
# shellcheck disable=SC2046  # pkg-config's flags are words
g++ -O2 -std=c++17 -I. -o hop_bench "$here/hop_bench.cpp" hop.pb.cc hop.grpc.pb.cc $(pkg-config --cflags --libs grpc++ protobuf)
# shellcheck source=tests/integration/free_port.sh
source "$here/../../tests/integration/free_port.sh"
for w in "${@:-0 1000 5000}"; do
  for ww in $w; do
    port=$(free_port); ./hop_bench server "127.0.0.1:$port" "$ww" & sp=$!; sleep 1
    echo "server busy $ww us a message:"
    for b in 8 4096 65536; do ./hop_bench client "127.0.0.1:$port" "$b"; done
    kill "$sp"; wait "$sp" 2>/dev/null || true; sp=
  done
done
