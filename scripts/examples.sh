#!/usr/bin/env bash
# Sets up, builds and runs the bundled examples.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=build bash scripts/build.sh
bash examples/run.sh build/cumulus
