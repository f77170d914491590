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
  libcli11-dev libfmt-dev \
  python3 python3-dev python3-venv python3-pip python3-setuptools python3-wheel \
  python3-pybind11 pybind11-dev libdlpack-dev python3-numpy python3-torch python3-onnx \
  python3-pytest python3-hypothesis python3-dask python3-distributed
