#!/usr/bin/env bash
# Runs the bundled examples through the cumulus command line and prints their outputs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cumulus=$(realpath "${1:-$here/../build/cumulus}")
show() {
  echo "\$ cumulus $*"
  "$cumulus" "$@"
  echo
}
cd "$here"
show run cumsum.onnx --input x=cumsum_x.npy
show run cumsum_axis.onnx --input x=cumsum_axis_x.npy --input axis=const:0
show run cumsum_axis.onnx --input x=cumsum_axis_x.npy --input axis=const:-1
show run cumprod.onnx --input x=cumprod_x.npy
show run sum_broadcast.onnx --input data_0=sum_broadcast_data_0.npy --input data_1=sum_broadcast_data_1.npy
show run sum_three.onnx --input data_0=sum_three_data_0.npy --input data_1=sum_three_data_1.npy \
  --input data_2=sum_three_data_2.npy
