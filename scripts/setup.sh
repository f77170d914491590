#!/usr/bin/env bash
# Installs what cumulus needs to build and test on Debian 12 (bookworm). Run as root.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "error: scripts/setup.sh installs Debian packages and must run as root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
  g++ clang libclang-rt-14-dev cmake ninja-build \
  libgtest-dev libgmock-dev libbenchmark-dev \
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata \
  libcli11-dev libfmt-dev
