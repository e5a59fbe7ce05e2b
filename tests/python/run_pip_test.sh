#!/usr/bin/env bash
# `pip install .` and `pip wheel .` from the repository, offline, with
# Debian's pip / setuptools / wheel, into a virtual environment that sees
# Debian's numpy (and torch); then the installed package opens a GGUF file
# and a GPTQ folder. The extension is the one this build made
# (NIBBLE_CMAKE_BUILD_DIR), so the test costs no second compile; a plain
# `pip install .` configures and builds its own. Exit 77 = skipped (no venv
# or pip for this interpreter). Usage: run_pip_test.sh PYTHON SRC BUILD WORK CHECKPOINTS
set -eu
python=$1 src=$2 build=$3 work=$4 ck=$5
rm -rf "$work" && mkdir -p "$work"
if ! "$python" -c "import venv, ensurepip" 2>/dev/null; then
  echo "SKIP: $python has no venv/ensurepip (Debian: python3-venv)"; exit 77
fi
"$python" -m venv --system-site-packages "$work/venv"
pip="$work/venv/bin/pip"
export NIBBLE_CMAKE_BUILD_DIR="$build" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
"$pip" install -q "$src"
"$pip" wheel -q --no-deps -w "$work/wheels" "$src"
ls "$work"/wheels/nibble-*.whl
# Without NIBBLE_CMAKE_BUILD_DIR, the source tree's own build/ is reused when
# it was configured for this interpreter (the Quick start's build is).
if [ "$(realpath "$build")" = "$(realpath "$src/build")" ]; then
  NIBBLE_CMAKE_BUILD_DIR= "$pip" install -v --no-deps --force-reinstall "$src" >"$work/reuse.log" 2>&1
  grep -q "reusing the CMake build" "$work/reuse.log" ||
    { echo "FAIL: pip install . did not reuse $src/build"; tail -20 "$work/reuse.log"; exit 1; }
  echo "pip install . reused build/"
fi
cd "$work"  # not the source tree: import the installed package
"$work/venv/bin/python" - "$ck" "$work" <<'PY'
import os, sys
import nibble
ck, work = sys.argv[1], sys.argv[2]
assert nibble.__file__.startswith(work), nibble.__file__
assert os.path.exists(os.path.join(os.path.dirname(nibble.__file__), "__init__.pyi"))
with nibble.open(os.path.join(ck, "model.gguf")) as f:
    w = f.get_tensor("blk.0.q4_k.weight", dtype="bf16")
    print("gguf:", w.shape, w.dtype)
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    with nibble.open(os.path.join(ck, "gptq"), framework="pt") as f:
        t = f.get_tensor("model.layers.0.self_attn.q_proj.weight", dtype="bf16")
        assert t.dtype == torch.bfloat16, t.dtype
        print("gptq: torch", tuple(t.shape), t.dtype)
else:
    print("gptq: torch not importable, numpy only")
print("installed nibble", nibble.__version__, "from", os.path.dirname(nibble.__file__))
PY
echo "pip install: ok"
