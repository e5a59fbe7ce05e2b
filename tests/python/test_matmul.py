"""nibble's matmul from Python: Checkpoint.matmul / dequantizer(...).matmul on
every quantized 2-D tensor of the test checkpoints (GGUF block types, GPTQ,
AWQ, FP8, and built here: compressed-tensors and GPTQ act-order), on every
block type ggml defines (a GGUF of random blocks: the i-quants, TQ1_0,
MXFP4, NVFP4, Q1_0 / Q2_0 too), on ONNX Runtime's MatMulNBits (the [K, N]
operand: weight='in_out'), and Dequantizer.matmul on PMX / ONNX requests,
equal bit for bit to a numpy reference of the documented order (16 partial
sums, each step a fused multiply-add, then a halving sum;
tests/python/matmul_util.py, whose fused multiply-add is checked here
against the C library's fmaf)
on the dequantized weight; the same bits for 1, 2 and 3 threads; within the
stated error bound of a float64 dot product; bias, X in bfloat16, Y in X's
type; the BLAS prefill path (gemm="blas") within its bound and the same for
every thread count; bad input refused. (The producers' tests run the same check on every
layout they build: test_hf_producers.py, test_float_formats.py.)
Usage: test_matmul.py CHECKPOINTS_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys
import threading

try:
    import numpy as np
    import nibble
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_util import GGML_BLOCK_TYPES, write_gguf  # noqa: E402
from interrupt_util import ctrl_c_stops  # noqa: E402
from matmul_util import (blas_mismatches, dot_ref, expert_matmul_mismatches,  # noqa: E402
                         fma32, matmul_mismatches, same_bits)
from packing_util import pack_cols, pack_rows  # noqa: E402
from safetensors_util import bf16_bits, bf16_value, write_st  # noqa: E402

ck_dir, work = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name + (": " + str(detail) if detail else ""))


rng = np.random.default_rng(50)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def fmaf_cases():
    """Operands where one rounding and two differ: products one bit past
    float32 (1 + u)^2 against their rounded value; sums 2^-36 past a
    float32 tie on either side, which a float64 sum rounds onto the tie
    (the model's round to odd); cancellations; random magnitudes;
    subnormal, infinite and NaN results."""
    cases = []
    u = np.float32(2.0 ** -12)
    t = np.float32(1 - 2.0 ** -12 + 2.0 ** -24)  # (1 + u) * t = 1 + 2^-36
    for s in (1, -1):
        for e in range(-100, 100, 9):
            c = np.float32(s * 2.0 ** e)
            a = np.float32(s * (1 + u) * 2.0 ** (e - 24))  # past the tie above c
            cases += [(a, t, c), (np.float32(a / 2), -t, c)]  # and below it
    for s in (1, -1):
        for e in range(-140, 60, 7):
            a = np.float32(s * (1 + u) * 2.0 ** e)
            cases += [(a, np.float32(1 + u), -np.float32(a * np.float32(1 + u))),
                      (a, np.float32(1 - u), np.float32(-a)), (a, a, np.float32(2.0 ** (2 * e)))]
    r = np.random.default_rng(7)
    m = r.standard_normal((3, 20000)).astype(np.float32)
    m *= (2.0 ** r.integers(-60, 60, m.shape)).astype(np.float32)
    m[2, :5000] = -(m[0, :5000] * m[1, :5000])  # cancel the rounded product
    cases += list(zip(*m))
    cases += [(np.float32(x), np.float32(y), np.float32(z)) for x, y, z in
              ((1e-30, 1e-10, 0.0), (1e-20, 1e-20, 1e-45), (3e38, 10.0, -3e38),
               (np.inf, 0.0, 1.0), (np.inf, 1.0, -np.inf), (np.nan, 1.0, 1.0), (-0.0, 1.0, 0.0),
               (0.0, 1.0, -0.0), (-0.0, 0.0, -0.0))]
    return [np.array(v, np.float32) for v in zip(*cases)]


try:
    import ctypes
    libm = ctypes.CDLL("libm.so.6")
    libm.fmaf.restype = ctypes.c_float
    libm.fmaf.argtypes = [ctypes.c_float] * 3
except OSError:
    libm = None
if libm is not None:
    a, b, c = fmaf_cases()
    want = np.array([libm.fmaf(x, y, z) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())],
                    np.float32)
    got = fma32(a, b, c)
    with np.errstate(all="ignore"):
        unfused = a * b + c
    check("the model's fma32 == the C library's fmaf (%d cases)" % len(a), same_bits(got, want),
          np.flatnonzero(~((got.view(np.uint32) == want.view(np.uint32)) |
                           (np.isnan(got) & np.isnan(want))))[:5])
    check("the fmaf cases include products rounded differently than fused",
          not same_bits(unfused, want))

# compressed-tensors (asymmetric, act-order) and GPTQ act-order folders.
N, K, G = 48, 256, 32
ct = os.path.join(work, "ct")
os.makedirs(ct)
p = "model.layers.0.mlp.down_proj"
write_st(os.path.join(ct, "model.safetensors"), {
    p + ".weight_packed": ("I32", pack_cols(rng.integers(0, 16, (N, K)), 4)),
    p + ".weight_scale": ("BF16", bf16_bits(0.01 + 0.02 * rng.random((N, K // G)))),
    p + ".weight_zero_point": ("I32", pack_rows(rng.integers(0, 16, (N, K // G)), 4)),
    p + ".weight_shape": ("I64", np.array([N, K], np.int64)),
    p + ".weight_g_idx": ("I32", rng.permutation(np.arange(K) // G).astype(np.int32))})
with open(os.path.join(ct, "config.json"), "w") as f:
    f.write('{"model_type": "llama", "quantization_config": {"quant_method": '
            '"compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": '
            '{"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": '
            'false, "strategy": "group", "group_size": 32, "actorder": "group"}}}}}')
gq = os.path.join(work, "gptq-act")  # a llama MLP block, GPTQ act-order
os.makedirs(gq)
H, FF = 128, 256
t = {}
for proj, (n, k) in {"gate_proj": (FF, H), "up_proj": (FF, H), "down_proj": (H, FF)}.items():
    q = "model.layers.0.mlp." + proj
    t.update({q + ".qweight": ("I32", pack_rows(rng.integers(0, 16, (k, n)), 4)),
              q + ".qzeros": ("I32", pack_cols(rng.integers(0, 16, (k // G, n)), 4)),
              q + ".scales": ("F16", (0.01 + 0.02 * rng.random((k // G, n))).astype(np.float16)),
              q + ".g_idx": ("I32", rng.permutation(np.arange(k) // G).astype(np.int32))})
write_st(os.path.join(gq, "model.safetensors"), t)
with open(os.path.join(gq, "config.json"), "w") as f:
    f.write('{"model_type": "llama", "quantization_config": {"quant_method": "gptq", "bits": 4, '
            '"group_size": 32, "desc_act": true, "sym": false}}')

sources = [os.path.join(ck_dir, n) for n in ("model.gguf", "llama_tiny.gguf", "gptq", "awq", "fp8")]
sources += [ct, gq]
kinds = set()
for src in sources:
    if not os.path.exists(src):
        check("fixture " + src, False, "missing")
        continue
    with nibble.open(src) as f:
        for info in f.tensors():
            name = info["name"]
            if not info["quantized"] or not info["supported"] or len(info["shape"]) != 2:
                continue
            n, k = info["shape"]
            if n * k > (1 << 21):
                continue
            kinds.add(info["kind"])
            w = np.asarray(f.get_tensor(name, dtype="f32"), np.float32)
            d = f.dequantizer(name, dtype="f32")
            label = "%s %s (%s)" % (os.path.basename(src), name, info["kind"])
            for m in (1, 5):
                x = rng.standard_normal((m, k)).astype(np.float32)
                want = dot_ref(x, w)
                y1 = d.matmul(x, threads=1)
                y3 = d.matmul(x, threads=3)
                check(label + " m=%d: the documented order, bit for bit" % m,
                      y1.dtype == np.float32 and np.array_equal(y1.view(np.uint32),
                                                                want.view(np.uint32)),
                      np.max(np.abs(y1 - want)))
                check(label + " m=%d: 1 and 3 threads agree" % m,
                      np.array_equal(y1.view(np.uint32), y3.view(np.uint32)))
                exact = x.astype(np.float64) @ w.astype(np.float64).T
                mag = np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T
                j = -(-k // 16) + 4
                bound = j * 2.0 ** -24 / (1 - j * 2.0 ** -24) * mag
                check(label + " m=%d: within the stated bound of float64" % m,
                      np.all(np.abs(y1 - exact) <= bound + 1e-30))
            t = f.get_tensor(name)  # the default output type: what Checkpoint.matmul uses
            wd = bf16_value(t) if t.dtype == np.uint16 else np.asarray(t, np.float32)
            check(label + ": Checkpoint.matmul (the default type's weight)", np.array_equal(
                f.matmul(name, x[:1]).view(np.uint32),
                dot_ref(x[:1], wd.astype(np.float32)).view(np.uint32)))
            if nibble.blas() is not None:  # gemm= reaches the Dequantizer's matmul
                xb = rng.standard_normal((33, k)).astype(np.float32)
                check(label + ": Checkpoint.matmul(gemm='blas') == its Dequantizer's",
                      same_bits(f.matmul(name, xb, gemm="blas"),
                                f.dequantizer(name).matmul(xb, gemm="blas")))

# Long rows (K = 8448 > 8192; GPTQ / AWQ by columns up to M = 8, tiles
# of 16 rows x a chunk of K beyond): GPTQ, GPTQ act-order and AWQ.
NL, KL, GL = 24, 8448, 128
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
for label, cfg in (("gptq", '"quant_method": "gptq", "bits": 4, "group_size": 128, '
                            '"desc_act": false, "sym": false'),
                   ("gptq-act", '"quant_method": "gptq", "bits": 4, "group_size": 128, '
                                '"desc_act": true, "sym": false'),
                   ("awq", '"quant_method": "awq", "bits": 4, "group_size": 128, '
                           '"version": "gemm", "zero_point": true')):
    folder = os.path.join(work, "long-" + label)
    os.makedirs(folder)
    q = "model.layers.0.mlp.down_proj"
    scales = (0.01 + 0.02 * rng.random((KL // GL, NL))).astype(np.float16)
    if label == "awq":
        t = {q + ".qweight": ("I32", pack_cols(rng.integers(0, 16, (KL, NL)), 4, AWQ_ORDER)),
             q + ".qzeros": ("I32", pack_cols(rng.integers(0, 16, (KL // GL, NL)), 4, AWQ_ORDER)),
             q + ".scales": ("F16", scales)}
    else:
        t = {q + ".qweight": ("I32", pack_rows(rng.integers(0, 16, (KL, NL)), 4)),
             q + ".qzeros": ("I32", pack_cols(rng.integers(0, 16, (KL // GL, NL)), 4)),
             q + ".scales": ("F16", scales)}
        if label == "gptq-act":
            t[q + ".g_idx"] = ("I32", rng.permutation(np.arange(KL) // GL).astype(np.int32))
    write_st(os.path.join(folder, "model.safetensors"), t)
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write('{"model_type": "llama", "quantization_config": {%s}}' % cfg)
    with nibble.open(folder) as f:
        name = q + ".weight"
        kinds.add(f.info(name)["kind"])
        # (by columns: 3 rows of X as 4, 6 as 8; 11: tiles)
        bad = matmul_mismatches(f, name, rng, ms=(1, 3, 6, 11))
        check("long rows: %s matmul (K = %d), bit for bit" % (label, KL), not bad, bad)

# Every block type ggml defines (the i-quants, TQ1_0 / TQ2_0, MXFP4, NVFP4,
# Q1_0 / Q2_0 too): one GGUF of random blocks, K = 2 blocks, an odd N.
types_gguf = os.path.join(work, "every_type.gguf")
tensors = []
for tid, (tname, be, bb, _) in sorted(GGML_BLOCK_TYPES.items()):
    n, k = 5, 2 * be
    raw = rng.integers(0, 256, n * (k // be) * bb, dtype=np.uint8).tobytes()
    tensors.append(("blk.0.%s.weight" % tname, (tid, [k, n], raw)))
write_gguf(types_gguf, [], tensors)
with nibble.open(types_gguf) as f:
    covered = 0
    for info in f.tensors():
        if not info["supported"]:
            check("every type: %s supported" % info["name"], False, info)
            continue
        bad = matmul_mismatches(f, info["name"], rng, ms=(1, 4))
        check("every type: %s (%s) matmul, bit for bit" % (info["name"], info["kind"]), not bad,
              bad)
        covered += 1
    check("every type: all %d ggml block types" % len(GGML_BLOCK_TYPES),
          covered == len(GGML_BLOCK_TYPES), covered)

# MoE experts as GGUF stores them (ffn_*_exps, [E, N, K]): the matmul on
# expert e's matrix (MatMulOptions::expert), every block type's own rows.
experts_gguf = os.path.join(work, "experts.gguf")
tensors = []
for tid in (2, 12, 16, 40):  # q4_0, q4_K, iq2_xxs, nvfp4
    tname, be, bb, _ = GGML_BLOCK_TYPES[tid]
    e, n, k = 3, 5, 2 * be
    raw = rng.integers(0, 256, e * n * (k // be) * bb, dtype=np.uint8).tobytes()
    tensors.append(("blk.0.ffn_up_exps.%s.weight" % tname, (tid, [k, n, e], raw)))
write_gguf(experts_gguf, [], tensors)
with nibble.open(experts_gguf) as f:
    for info in f.tensors():
        name = info["name"]
        check("experts: %s is [E, N, K]" % name, len(info["shape"]) == 3, info["shape"])
        bad = expert_matmul_mismatches(f, name, rng)
        check("experts: %s (%s) matmul per expert, bit for bit" % (name, info["kind"]), not bad,
              bad)
        w3 = np.asarray(f.get_tensor(name, dtype="f32"), np.float32)
        x = rng.standard_normal((2, w3.shape[2])).astype(np.float32)
        t = f.get_tensor(name)
        wd = (bf16_value(t) if t.dtype == np.uint16 else np.asarray(t, np.float32))[2]
        check("experts: %s Checkpoint.matmul(expert=2)" % name,
              same_bits(f.matmul(name, x, expert=2), dot_ref(x, wd.astype(np.float32))))
        for label, kw, needle in [("expert out of range", {"expert": 3}, "not 3"),
                                  ("negative expert", {"expert": -1}, "expert must be >= 0")]:
            try:
                f.matmul(name, x, **kw)
                check("experts: refused " + label, False)
            except ValueError as err:
                check("experts: refused " + label, needle in str(err), err)

# ONNX Runtime's MatMulNBits (4-bit with zero points, 8-bit, no zero points
# with a bias input): the [K, N] operand of a MatMul, so weight="in_out".
corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus", "fold")
for fn in ("fold_mmnb_zp.onnx", "fold_mmnb8.onnx", "fold_mmnb_nozp_bias.onnx"):
    with nibble.open(os.path.join(corpus, fn)) as f:
        for info in f.tensors():
            if not info["quantized"]:
                continue
            kinds.add(info["kind"])
            w = np.asarray(f.get_tensor(info["name"], dtype="f32"), np.float32)  # [K, N]
            d = f.dequantizer(info["name"], dtype="f32")
            for m in (1, 4):
                x = rng.standard_normal((m, w.shape[0])).astype(np.float32)
                want = dot_ref(x, np.ascontiguousarray(w.T))
                check("%s %s m=%d: weight='in_out', bit for bit" % (fn, info["name"], m),
                      all(same_bits(d.matmul(x, weight="in_out", threads=t), want)
                          for t in (1, 2)))
check("covered: MatMulNBits", any("MatMulNBits" in k for k in kinds), sorted(kinds))

for want_kind in ("GPTQ", "AWQ"):
    check("covered: " + want_kind, any(want_kind in k for k in kinds), sorted(kinds))
check("covered: several kinds", len(kinds) >= 6, sorted(kinds))

# Dequantizer requests, bias, bfloat16 X, Y in X's type, orientations.
w32 = rng.standard_normal((64, 96)).astype(np.float32)
q = nibble.quantize(w32, bits=4, group_size=32)
d = nibble.Dequantizer.pmx(q["x"], q["scale"], group_size=32)
w = d.run()
x = rng.standard_normal((3, 96)).astype(np.float32)
b = rng.standard_normal(64).astype(np.float32)
y = d.matmul(x, b)
check("PMX with bias", np.array_equal(y.view(np.uint32), (dot_ref(x, w) + b).view(np.uint32)))
xb = bf16_bits(x)
yb = d.matmul(xb, x_dtype="bfloat16", out_dtype="bfloat16")
want = dot_ref(bf16_value(xb).astype(np.float32), w)
check("X in bfloat16, Y in bfloat16 (rounded once)",
      yb.dtype == np.uint16 and np.array_equal(yb, bf16_bits(want)))
xk = rng.standard_normal((2, 64)).astype(np.float32)
y = d.matmul(xk, weight="in_out")
check("weight='in_out': x @ W", np.array_equal(y.view(np.uint32),
                                               dot_ref(xk, np.ascontiguousarray(w.T)).view(np.uint32)))
# gemm="blas" (the prefill path) on this PMX weight, and on the Checkpoint
# entry point; nibble.blas() names the library or is None.
check("nibble.blas(): OpenBLAS's configuration or None",
      nibble.blas() is None or "OpenBLAS" in nibble.blas(), nibble.blas())
bad = blas_mismatches(d, w, rng)
check("gemm='blas' on PMX: within its bound, the same bits for 1-3 threads", not bad, bad)
# torch tensors (CPU) in, torch tensors out; nibble.matmul(w, x) is w.matmul(x).
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    xt = torch.from_numpy(rng.standard_normal((5, 96)).astype(np.float32))
    bt = torch.from_numpy(rng.standard_normal(64).astype(np.float32))
    want = d.matmul(xt.numpy(), bt.numpy())
    y = nibble.matmul(d, xt, bt)
    check("torch: float32 X and bias -> a float32 tensor, the numpy bits",
          isinstance(y, torch.Tensor) and y.dtype == torch.float32 and
          same_bits(y.numpy(), want))
    xh = xt.half()
    y = d.matmul(xh, out_dtype=torch.float16)
    check("torch: float16 X, Y in X's type", y.dtype == torch.float16 and np.array_equal(
        y.numpy(), d.matmul(xh.numpy(), out_dtype="float16")))
    xb = xt.bfloat16()
    bits = xb.view(torch.int16).numpy().view(np.uint16)
    y = d.matmul(xb, bt.bfloat16(), out_dtype="bfloat16")
    yb = d.matmul(bits, (bt.bfloat16().float()).numpy(), x_dtype="bfloat16", out_dtype="bfloat16")
    check("torch: bfloat16 X and bias, Y in X's type: torch.bfloat16, the numpy bits",
          y.dtype == torch.bfloat16 and np.array_equal(y.view(torch.int16).numpy().view(np.uint16),
                                                       yb))
    y = d.matmul(xt.T.contiguous().T)  # a non-contiguous view: copied
    check("torch: a non-contiguous X", same_bits(y.numpy(), d.matmul(xt.numpy())))
    y = nibble.matmul(d, torch.from_numpy(rng.standard_normal((40, 96)).astype(np.float32)),
                      gemm="exact")
    check("torch: nibble.matmul keyword options", tuple(y.shape) == (40, 64))
    for label, fn, needle in [
            ("float64 X", lambda: d.matmul(xt.double()), "X must be float32"),
            ("not a Dequantizer", lambda: nibble.matmul(w, xt), "must be a nibble.Dequantizer")]:
        try:
            fn()
            check("torch refused: " + label, False)
        except (ValueError, TypeError) as e:
            check("torch refused: " + label, needle in str(e), e)
# numpy X and bias as torch's: a strided view is copied, not refused; a
# list goes through np.asarray (float64 there: refused by its type).
xs = rng.standard_normal((96, 5)).astype(np.float32).T
bs = rng.standard_normal(128).astype(np.float32)[::2]
check("numpy: a transposed X and a strided bias, the contiguous copies' bits",
      not xs.flags.c_contiguous and same_bits(
          d.matmul(xs, bs), d.matmul(np.ascontiguousarray(xs), np.ascontiguousarray(bs))))
check("numpy: a column slice of X", same_bits(
    d.matmul(np.ones((3, 192), np.float32)[:, ::2]), d.matmul(np.ones((3, 96), np.float32))))
float_ck = nibble.open(os.path.join(ck_dir, "model.gguf"))
for label, fn, needle in [
        ("a list X (float64)", lambda: d.matmul(np.ones((2, 96)).tolist()), "X must be float32"),
        ("K mismatch", lambda: d.matmul(rng.standard_normal((2, 95)).astype(np.float32)),
         "must end in K = 96"),
        ("integer X", lambda: d.matmul(np.ones((2, 96), np.int32)), "X must be float32"),
        ("float64 X", lambda: d.matmul(np.ones((2, 96))), "X must be float32"),
        ("Y type", lambda: d.matmul(x, out_dtype="float16"), "Y must be float32 or X's type"),
        ("bias length", lambda: d.matmul(x, np.ones(3, np.float32)), "must be [N] = [64]"),
        ("weight spelling", lambda: d.matmul(x, weight="nk"), "weight must be"),
        ("gemm spelling", lambda: d.matmul(x, gemm="fast"), "gemm must be 'exact' or 'blas'"),
        ("expert of a 2-D weight", lambda: d.matmul(x, expert=0), "of a 2-D weight"),
        ("not quantized", lambda: float_ck.dequantizer(
            [i["name"] for i in float_ck.tensors() if not i["quantized"]][0]), "not quantized")]:
    try:
        fn()
        check("refused: " + label, False)
    except ValueError as e:
        check("refused: " + label, needle in str(e), e)

# Ctrl-C in the middle of a long matmul: KeyboardInterrupt between tiles,
# long before the matmul would have finished (interrupt_util says how it is
# judged).
wl = rng.standard_normal((4096, 2048)).astype(np.float32)
ql = nibble.quantize(wl, bits=4, group_size=128)
dl = nibble.Dequantizer.pmx(ql["x"], ql["scale"], group_size=128)
xl = rng.standard_normal((4096, 2048)).astype(np.float32)
for gemm in ("exact", "blas") if nibble.blas() is not None else ("exact",):
    ok, note = ctrl_c_stops(lambda gemm=gemm: dl.matmul(xl, threads=1, gemm=gemm))
    check("Ctrl-C (gemm=%s): stops between tiles" % gemm, ok, note)

# Two Python threads multiplying at once (the GIL released): each gets the
# bits it gets alone, on both paths (the BLAS's buffers shared by threads).
xs = [rng.standard_normal((40, 2048)).astype(np.float32) for _ in range(2)]
for gemm in ("exact", "blas") if nibble.blas() is not None else ("exact",):
    alone = [dl.matmul(x, threads=2, gemm=gemm) for x in xs]
    wrong = [0, 0]

    def worker(i, gemm=gemm, alone=alone, wrong=wrong):
        for _ in range(60):
            if not same_bits(dl.matmul(xs[i], threads=2, gemm=gemm), alone[i]):
                wrong[i] += 1

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check("two Python threads at once (gemm=%s): the bits of each alone" % gemm, wrong == [0, 0],
          wrong)

# The example client: a llama MLP block through nibble's matmul on a GGUF
# (Q4_0 / Q4_1 / Q4_K) and a GPTQ act-order checkpoint, against numpy.
example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "mlp_matmul.py")
for src in (os.path.join(ck_dir, "llama_tiny.gguf"), gq):
    r = subprocess.run([sys.executable, example, src, "--tokens", "3"], capture_output=True,
                       text=True)
    check("examples/mlp_matmul.py " + os.path.basename(src),
          r.returncode == 0 and "max |Y - numpy|" in r.stdout, r.stdout + r.stderr)
    if nibble.blas() is not None:  # the prefill path: 40 tokens through the BLAS
        r = subprocess.run([sys.executable, example, src, "--tokens", "40", "--gemm", "blas"],
                           capture_output=True, text=True)
        check("examples/mlp_matmul.py --gemm blas " + os.path.basename(src),
              r.returncode == 0 and "max |Y - numpy|" in r.stdout, r.stdout + r.stderr)

# The example as a MoE block: a GGUF MoE layer (router + Q4_0 gate / up and
# Q8_0 down experts, moderate scales), top-2 routing, each expert's tokens
# through matmul(expert=e), against numpy.
def moderate_blocks(tid, n_blocks):
    _, _, bb, _ = GGML_BLOCK_TYPES[tid]  # d (float16) first, then the codes
    body = rng.integers(0, 256, (n_blocks, bb - 2), dtype=np.uint8)
    return b"".join(np.float16(0.02).tobytes() + row.tobytes() for row in body)


EX, HX, FX = 4, 64, 96
moe_gguf = os.path.join(work, "moe.gguf")
write_gguf(moe_gguf, [], [
    ("blk.0.ffn_gate_inp.weight", rng.standard_normal((EX, HX)).astype(np.float32)),
    ("blk.0.ffn_gate_exps.weight", (2, [HX, FX, EX], moderate_blocks(2, EX * FX * HX // 32))),
    ("blk.0.ffn_up_exps.weight", (2, [HX, FX, EX], moderate_blocks(2, EX * FX * HX // 32))),
    ("blk.0.ffn_down_exps.weight", (8, [FX, HX, EX], moderate_blocks(8, EX * HX * FX // 32)))])
r = subprocess.run([sys.executable, example, moe_gguf, "--tokens", "7"], capture_output=True,
                   text=True)
check("examples/mlp_matmul.py on a MoE layer (top-2 of 4 experts)",
      r.returncode == 0 and "MoE block of layer 0 (4 experts, top 2)" in r.stdout,
      r.stdout + r.stderr)

print("matmul: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
