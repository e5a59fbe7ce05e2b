#!/usr/bin/env bash
# Integration test: models built the way exporters do are folded by
# `nibble fold`, and ONNX Runtime (npm onnxruntime-node, its CPU provider)
# must give the same outputs for original and folded models.
# Usage: run_ort_fold_test.sh NIBBLE MAKE_FOLD_MODELS WORKDIR
# Exit 77 (skipped) when node/npm or the package are unavailable.
set -u
nibble=$1 make_models=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not available; install nodejs and npm to run the ONNX Runtime test"
  exit 77
fi
ort_dir="$work/ort"
if [ ! -d "$ort_dir/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ort_dir"
  if ! (cd "$ort_dir" && timeout 600 npm install --ignore-scripts --no-audit --no-fund \
          --loglevel=error onnxruntime-node@1.30.0 >npm.log 2>&1); then
    echo "SKIP: npm install onnxruntime-node failed (see $ort_dir/npm.log)"
    exit 77
  fi
fi
# Its own folder: fold_models/ is the fixture other tests read while this
# one runs (removing and rewriting it under them failed hostile_corpus).
models="$work/ort_fold_models"
rm -rf "$models" && mkdir -p "$models"
"$make_models" "$models" >/dev/null || exit 1
pairs=()
for m in qdq_int4 qdq_uint4_f16 opmx_int4 mmnb_zp mmnb_nozp_bias mmnb8 qdq_external qdq_overridable; do
  "$nibble" fold --quiet "$models/$m.onnx" "$models/folded_$m.onnx" || exit 1
  pairs+=("$models/$m.onnx" "$models/folded_$m.onnx")
done
# The same with the output forced to external data.
"$nibble" fold --quiet --external-data "$models/mmnb_zp.onnx" "$models/folded_ext_mmnb_zp.onnx" || exit 1
[ -f "$models/folded_ext_mmnb_zp.onnx.data" ] || { echo "FAIL: no external data written"; exit 1; }
pairs+=("$models/mmnb_zp.onnx" "$models/folded_ext_mmnb_zp.onnx")
# opmx is not an ONNX Runtime domain: the folded opmx model is compared
# with the equivalent ONNX DequantizeLinear model instead of its original.
pairs[4]="$models/opmx_int4_as_onnx.onnx"
NODE_PATH="$ort_dir/node_modules" node "$here/compare_models.js" "${pairs[@]}"
