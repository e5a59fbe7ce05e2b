"""The Python module with Debian's numpy: values against numpy formulas."""
import sys

import numpy as np

import nibble

passed = failed = 0


def check(name, cond):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name)


# The PMX worked int4x4 example: codes [[0,15],[8,9],[11,7],[4,10]].
x = np.array([[0x4B80 - 0x10000, 0xA79F - 0x10000]], dtype=np.int16)
y = nibble.dequantize_pmx(x, np.array([0.5], np.float32), quant_axis=0, group_size=0)
check("worked example", np.array_equal(y, (np.array([[0, 15], [8, 9], [11, 7], [4, 10]]) - 8) * 0.5))

# quantize -> dequantize round trip, every output type.
rng = np.random.default_rng(0)
w = (rng.standard_normal((64, 256)) * 0.02).astype(np.float32)
for scheme in ("symmetric", "asymmetric", "float_zeropoint"):
    q = nibble.quantize(w, bits=4, scheme=scheme, group_size=64)
    y = nibble.dequantize_pmx(q["x"], q["scale"], q["zero_point"], **q["attrs"])
    s = np.repeat(np.abs(q["scale"]), 64, axis=1)
    check("round trip " + scheme, y.shape == w.shape and np.all(np.abs(y - w) <= s / 2 + 1e-6))
    y16 = nibble.dequantize_pmx(q["x"], q["scale"], q["zero_point"], output_dtype="float16", **q["attrs"])
    check("float16 output " + scheme, y16.dtype == np.float16 and np.array_equal(y16, y.astype(np.float16)))

# Tiles equal slices of the whole tensor; threads give the same bits.
q = nibble.quantize(w, bits=4, group_size=128)
d = nibble.Dequantizer.pmx(q["x"], q["scale"], **q["attrs"])
whole = d.run()
check("tile", np.array_equal(d.tile(5, 37, 3, 200), whole[5:37, 3:200]))
check("threads", np.array_equal(d.run(threads=1), d.run(threads=2)))
buf = np.empty((64, 256), np.float32)
check("run(out=)", d.run(out=buf) is not None and np.array_equal(buf, whole))
try:
    d.run(out=np.empty((64, 256), np.float64))
    check("out dtype rejected", False)
except ValueError:
    check("out dtype rejected", True)
for bad in (100000, 40000, -1):
    try:
        d.run(threads=bad)
        check(f"threads={bad} rejected", False)
    except ValueError as e:
        check(f"threads={bad} rejected", "threads must be between 0" in str(e))
# An allocation that fails inside the library is a MemoryError (run in a
# child whose address space is capped just above what it has mapped).
import subprocess
import textwrap

oom = subprocess.run([sys.executable, "-c", textwrap.dedent("""
    import resource, numpy as np, nibble
    n = 1 << 23
    x = np.zeros((n, 1), np.uint8)
    s = np.ones(n, np.float16)   # widened to float32 (32 MiB) while preparing
    vm = [int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize:")][0]
    resource.setrlimit(resource.RLIMIT_AS, (vm + (16 << 20), vm + (16 << 20)))
    try:
        nibble.Dequantizer.onnx(x, s, axis=0)
        print("no error")
    except MemoryError as e:
        print("MemoryError:", e)
    """)], capture_output=True, text=True)
check("allocation failure is MemoryError",
      oom.stdout.strip() == "MemoryError: out of memory in PrepareOnnx")
check("rows/cols", (d.rows, d.cols, tuple(d.shape), d.dtype) == (64, 256, (64, 256), "float32"))
# Dequantizing "in place" (out over the codes it reads) is refused.
arena = np.zeros(2 * 64 * 256 * 4, np.uint8)
codes = arena[: q["x"].nbytes].view(q["x"].dtype).reshape(q["x"].shape)
codes[...] = q["x"]
d_in = nibble.Dequantizer.pmx(codes, q["scale"], **q["attrs"])
try:
    d_in.run(out=arena[: 64 * 256 * 4].view(np.float32).reshape(64, 256))
    check("in-place output rejected", False)
except ValueError as e:
    check("in-place output message", "the output overlaps input X" in str(e))
check("codes unchanged", np.array_equal(codes, q["x"]))
after = arena[q["x"].nbytes:q["x"].nbytes + 64 * 256 * 4].view(np.float32).reshape(64, 256)
check("output just after the codes", d_in.run(out=after) is not None and np.array_equal(after, whole))

# ONNX: uint8 per-axis with zero point, and packed int4 blocked.
xu = rng.integers(0, 256, (3, 40), dtype=np.uint8)
sc = rng.random(40, dtype=np.float32)
zp = rng.integers(0, 256, 40, dtype=np.uint8)
y = nibble.dequantize_onnx(xu, sc, zp, axis=1)
check("onnx uint8 per-axis", np.array_equal(y, ((xu.astype(np.int32) - zp) * sc).astype(np.float32)))
codes = rng.integers(-8, 8, (4, 64))
packed = ((codes[:, 0::2] & 0xF) | ((codes[:, 1::2] & 0xF) << 4)).astype(np.uint8)
sc = rng.random((4, 2), dtype=np.float32)
y = nibble.dequantize_onnx(packed, sc, axis=1, block_size=32, x_dtype="int4", shape=[4, 64])
check("onnx int4 blocked", np.array_equal(y, (codes * np.repeat(sc, 32, axis=1)).astype(np.float32)))

# Errors are ValueError with the operator's message.
try:
    nibble.dequantize_pmx(x, np.array([0.5], np.float32), quant_axis=2)
    check("error raised", False)
except ValueError as e:
    check("error message", "attribute quant_axis must be 0 or 1 (got 2)" in str(e))
try:
    nibble.dequantize_pmx(np.asfortranarray(np.zeros((2, 4), np.int16)), np.ones(1, np.float32), quant_axis=0, group_size=0)
    check("non-contiguous rejected", False)
except ValueError as e:
    check("non-contiguous message", "C-contiguous" in str(e))

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
