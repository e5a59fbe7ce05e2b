"""Every ggml block type nibble reads, against ggml's own code.

ggml's ggml-quants.c (the file whose dequantize_row_<type> is each type's
to_float, and whose quantize_<type> writes the blocks llama.cpp's
quantizer stores) is compiled here into a small shared library and called
through ctypes. For each type: weights quantized by ggml itself (Gaussian
rows with outliers; an importance matrix for the types that require one)
and blocks of random bytes (every code and scale bit pattern, NaN and Inf
scales included) go into one GGUF file; `nibble dequant` writes it as
float32, float16 and bfloat16, and every value must have the bits of ggml's
dequantize_row_<type> output (float16 / bfloat16: that float32 rounded to
nearest even; NaN only checked to be NaN).

ggml's source: the directory in $NIBBLE_GGML_SRC (ggml/src of llama.cpp,
holding ggml-quants.c, ggml-common.h, ggml-impl.h and ggml-cpu/), else the
copy of ggml vendored in the npm package llama.rn (symbols prefixed LM_),
downloaded from the npm registry (or with `npm pack`) into the work
directory and checked against its SHA-256. Without either (no network) the
test is skipped with that reason.
Usage: test_ggml_cross_check.py NIBBLE_CLI WORK_DIR
"""
import ctypes
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import urllib.request

try:
    import numpy as np
except ImportError as e:
    print("SKIP: %s (python3-numpy is needed by %s)" % (e, sys.executable))
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_util import GGML_BLOCK_TYPES  # noqa: E402
from safetensors_util import read_st_bits  # noqa: E402

cli, work = sys.argv[1], os.path.abspath(sys.argv[2])
LLAMA_RN = "llama.rn@0.12.9"  # vendors ggml with every type through id 42
os.makedirs(work, exist_ok=True)


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


LLAMA_RN_URL = "https://registry.npmjs.org/llama.rn/-/llama.rn-0.12.9.tgz"
LLAMA_RN_SHA256 = "7069fbf1db95f07cfd9bfbbd0d160be5c0d329c5985868e00c3248338598bca5"


def fetch_llama_rn(dest):
    """The npm tarball of LLAMA_RN in dest (the registry over HTTPS, else
    `npm pack`): its path, or None and why; a SHA-256 other than the pinned
    one fails the test."""
    tgz = os.path.join(dest, "llama.rn.tgz")
    why = ""
    try:
        with urllib.request.urlopen(LLAMA_RN_URL, timeout=120) as r:
            data = r.read()
        with open(tgz, "wb") as f:
            f.write(data)
    except (OSError, ValueError) as e:
        why = "download failed (%s)" % e
        if shutil.which("npm") is not None:
            try:
                r = subprocess.run(["npm", "pack", "--silent", LLAMA_RN], cwd=dest,
                                   capture_output=True, text=True, timeout=300)
                packed = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
                if r.returncode == 0 and packed:
                    os.replace(os.path.join(dest, packed), tgz)
                    why = ""
            except (subprocess.TimeoutExpired, OSError) as e2:
                why += "; npm pack failed (%s)" % e2
    if why:
        return None, why
    with open(tgz, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != LLAMA_RN_SHA256:  # npm versions are immutable: not a network hiccup
        print("FAIL %s has SHA-256 %s, expected %s" % (LLAMA_RN, digest, LLAMA_RN_SHA256))
        sys.exit(1)
    return tgz, ""


def ggml_source():
    src = os.environ.get("NIBBLE_GGML_SRC")
    if src:
        return src
    pkg = os.path.join(work, "llama.rn", "package", "cpp")
    if os.path.exists(os.path.join(pkg, "ggml-quants.c")):
        return pkg
    dest = os.path.join(work, "llama.rn")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    tgz, why = fetch_llama_rn(dest)
    if tgz is None:
        skip("no ggml source: set NIBBLE_GGML_SRC, or allow fetching %s: %s" % (LLAMA_RN, why))
    with tarfile.open(tgz) as t:
        t.extractall(dest, members=[m for m in t.getmembers()
                                    if m.name.startswith("package/cpp/") and
                                    m.name.count("/") <= 3 and (m.isfile() or m.isdir())])
    return pkg


# ggml type id -> (name, elements per block, bytes per block, needs an imatrix).
TYPES = GGML_BLOCK_TYPES


def build_ggml(src):
    prefix = "lm_" if "LM_GGML_TYPE_F32" in open(os.path.join(src, "ggml.h")).read() else ""
    rows = "\n".join("    case %d: return %d;" % (t, v[2]) for t, v in TYPES.items())
    blocks = "\n".join("    case %d: return %d;" % (t, v[1]) for t, v in TYPES.items())
    stub = os.path.join(work, "stubs.c")
    with open(stub, "w") as f:
        f.write("""#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
static size_t type_bytes(int t) { switch (t) {
%s
    default: return 0; } }
static int64_t type_block(int t) { switch (t) {
%s
    default: return 1; } }
void P_ggml_abort(const char* file, int line, const char* fmt, ...) {
  fprintf(stderr, "ggml abort at %%s:%%d: %%s\\n", file, line, fmt); abort(); }
size_t P_ggml_type_size(int t) { return type_bytes(t); }
size_t P_ggml_row_size(int t, int64_t ne) { return type_bytes(t) * (size_t)(ne / type_block(t)); }
const char* P_ggml_type_name(int t) { (void)t; return "?"; }
""".replace("P_", prefix) % (rows, blocks))
    lib = os.path.join(work, "libggml_quants.so")
    cmd = ["cc", "-O2", "-std=gnu11", "-fPIC", "-shared", "-ffp-contract=off",
           "-I" + src, "-I" + os.path.join(src, "ggml-cpu"),
           os.path.join(src, "ggml-quants.c"), stub, "-o", lib, "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL compiling ggml-quants.c:\n" + r.stderr[-3000:])
        sys.exit(1)
    g = ctypes.CDLL(lib)
    init2 = getattr(g, prefix + "iq2xs_init_impl")
    init3 = getattr(g, prefix + "iq3xs_init_impl")
    for t in (16, 17, 19, 22, 29):
        init2(ctypes.c_int(t))
    for n in (256, 512):
        init3(ctypes.c_int(n))
    return g


F32P = ctypes.POINTER(ctypes.c_float)


def quantize(g, t, x, imatrix):
    name, be, bb, _ = TYPES[t]
    rows, cols = x.shape
    out = np.zeros(rows * cols // be * bb, np.uint8)
    fn = getattr(g, "quantize_" + name)
    fn.restype = ctypes.c_size_t
    im = imatrix.ctypes.data_as(F32P) if imatrix is not None else None
    for r in range(rows):
        row = np.ascontiguousarray(x[r])
        dst = out[r * cols // be * bb:(r + 1) * cols // be * bb]
        fn(row.ctypes.data_as(F32P), dst.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(1),
           ctypes.c_int64(cols), im)
    return out


def dequantize(g, t, blocks, n):
    y = np.zeros(n, np.float32)
    fn = getattr(g, "dequantize_row_" + TYPES[t][0])
    fn(blocks.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(F32P), ctypes.c_int64(n))
    return y


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, tensors):
    """tensors: (name, ggml type, ne list, raw bytes)."""
    infos, data = b"", b""
    for name, t, ne, raw in tensors:
        infos += gstr(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        infos += struct.pack("<IQ", t, len(data))
        data += raw + b"\0" * (-len(raw) % 32)
    kv = gstr("general.architecture") + struct.pack("<I", 8) + gstr("llama")
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 1) + kv + infos
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head + data)


def rounded_bits(y, dtype):
    if dtype == "f32":
        return y.view(np.uint32)
    if dtype == "f16":
        with np.errstate(over="ignore"):  # beyond float16's range: Inf, as intended
            return y.astype(np.float16).view(np.uint16)
    u = y.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def is_nan_bits(bits, dtype):
    """NaN in the output type's bits."""
    if dtype == "f32":
        return (bits & 0x7F800000 == 0x7F800000) & (bits & 0x7FFFFF != 0)
    if dtype == "f16":
        return (bits & 0x7C00 == 0x7C00) & (bits & 0x3FF != 0)
    return (bits & 0x7F80 == 0x7F80) & (bits & 0x7F != 0)


def main():
    src = ggml_source()
    g = build_ggml(src)
    rng = np.random.default_rng(42)
    tensors, want = [], {}
    for t, (name, be, bb, needs_imatrix) in TYPES.items():
        rows, cols = 6, 1024
        x = rng.standard_normal((rows, cols)).astype(np.float32) * 0.02
        x[rng.random((rows, cols)) < 0.01] *= 30  # outliers, as real weights have
        imatrix = (rng.random(cols).astype(np.float32) + 0.1) if needs_imatrix else None
        quantized = quantize(g, t, x, imatrix)
        random = rng.integers(0, 256, rows * cols // be * bb, dtype=np.uint8)
        for kind, blocks in (("quantized", quantized), ("random", random)):
            tname = "%s.%s" % (name, kind)
            tensors.append((tname, t, [cols, rows], blocks.tobytes()))
            want[tname] = dequantize(g, t, blocks, rows * cols).reshape(rows, cols)
    gguf = os.path.join(work, "all_types.gguf")
    write_gguf(gguf, tensors)
    passed = failed = 0
    for dtype in ("f32", "f16", "bf16"):
        out = os.path.join(work, "all_types.%s.safetensors" % dtype)
        if os.path.exists(out):
            os.remove(out)
        r = subprocess.run([cli, "dequant", gguf, out, "--dtype", dtype],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL nibble dequant --dtype %s: %s" % (dtype, r.stderr.strip()))
            failed += 1
            continue
        got = read_st_bits(out)
        for tname, y in want.items():
            exp = rounded_bits(y, dtype)
            bits = got[tname]
            nan_w, nan_g = np.isnan(y), is_nan_bits(bits, dtype)
            bad = (nan_w != nan_g) | (~nan_w & (bits != exp))
            if bits.shape != exp.shape or bad.any():
                failed += 1
                i = np.argwhere(bad)[0] if bits.shape == exp.shape else None
                print("FAIL %s %s: %s" % (tname, dtype, "shape %s vs %s" % (bits.shape, exp.shape)
                      if i is None else "%d values differ, first at %s: ggml %s (%#x), nibble %#x"
                      % (bad.sum(), tuple(i), y[tuple(i)], exp[tuple(i)], bits[tuple(i)])))
            else:
                passed += 1
    print("ggml cross-check (%s): %d passed, %d failed (%d types x quantized / random blocks x "
          "f32 / f16 / bf16)" % (src, passed, failed, len(TYPES)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
