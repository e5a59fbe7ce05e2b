#!/usr/bin/env bash
# Differential test: random DequantizeLinear configurations through nibble and
# ONNX Runtime (npm onnxruntime-node, CPU). Exit 77 when node/npm or the
# package are unavailable. Usage: run_ort_differential.sh MAKE_CASES WORKDIR [COUNT SEED]
set -u
make_cases=$1 work=$2 count=${3:-400} seed=${4:-2026}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not available"; exit 77
fi
ort_dir="$work/ort"
if [ ! -d "$ort_dir/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ort_dir"
  if ! (cd "$ort_dir" && timeout 600 npm install --ignore-scripts --no-audit --no-fund \
          --loglevel=error onnxruntime-node@1.30.0 >npm.log 2>&1); then
    echo "SKIP: npm install onnxruntime-node failed (see $ort_dir/npm.log)"; exit 77
  fi
fi
cases="$work/dql_cases"
rm -rf "$cases"
"$make_cases" "$cases" "$count" "$seed" || exit 1
NODE_PATH="$ort_dir/node_modules" node "$here/compare_dql.js" "$cases"
