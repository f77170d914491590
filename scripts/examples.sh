#!/usr/bin/env bash
# Sets up, builds and runs the bundled examples; builds the Python package in the same build
# folder and installs it for Debian's python3 (into /usr/local/lib/python3.*/dist-packages, where
# Debian keeps what the administrator installs apart from apt's packages), then runs its example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=build bash scripts/build.sh
bash examples/run.sh build/cumulus

CUMULUS_BUILD_DIR="$(pwd)/build" /usr/bin/python3 -m pip install --no-build-isolation --no-deps --no-index \
  --break-system-packages --root-user-action=ignore ./python
python_example=$(pwd)/examples/python_example.py
(cd / && /usr/bin/python3 "$python_example")
