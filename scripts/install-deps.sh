#!/usr/bin/env bash
# Installs the Debian 12 packages ds4 builds with. Idempotent.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git ca-certificates
      libcli11-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev libreadline-dev libcpp-httplib-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libxxhash-dev libssl-dev libzstd-dev liblz4-dev liburing-dev
      clang libclang-rt-14-dev python3 python3-jinja2 python3-prometheus-client
      iproute2)  # ip netns, veth and tc: the pipeline test between network namespaces
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js: any install that provides node and npm will do (NodeSource's
# nodejs bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
