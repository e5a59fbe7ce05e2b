"""nibble's matmul checked against a numpy model of its documented order
(kernels/matmul.h): 16 partial sums, each step a float32 fused multiply-add
(one rounding), then a halving sum. Shared by the Python tests:
test_matmul.py and the producers' tests (every checkpoint layout they
build)."""
import numpy as np

LANES = 16  # kernels/matmul.h kDotLanes


def fma32(a, b, c):
    """float32 a * b + c rounded once (IEEE fusedMultiplyAdd), elementwise,
    broadcasting. numpy has no fma: a * b is exact in float64 (24 + 24
    bits), the sum is rounded to float64 and then to float32; two roundings
    can differ from one only where the first lands on a float32 tie, so the
    float64 sum is rounded to odd first (its exact error by TwoSum: where it
    is inexact, the neighbour on the exact value's side with an odd last bit),
    which makes the second rounding the correct one."""
    with np.errstate(all="ignore"):
        p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
        c = np.asarray(c, np.float64)
        s = p + c
        bb = s - p
        e = (p - (s - bb)) + (c - bb)  # s + e == p + c exactly (TwoSum)
        inexact = (e != 0) & np.isfinite(e)
        bits = s.view(np.int64)
        # toward zero where the exact value is nearer zero than s, then odd
        bits = (bits - (inexact & ((e < 0) != (s < 0)))) | inexact
        return bits.view(np.float64).astype(np.float32)


def dot_ref(x, w):
    """The documented order: x [M, K], w [N, K] float32 -> [M, N] float32."""
    m, k = x.shape
    kp = -(-k // LANES) * LANES
    xp = np.zeros((m, kp), np.float32)
    xp[:, :k] = x
    wp = np.zeros((w.shape[0], kp), np.float32)
    wp[:, :k] = w
    p = np.zeros((m, w.shape[0], LANES), np.float32)
    with np.errstate(all="ignore"):  # (random blocks may hold inf / NaN scales)
        for c in range(kp // LANES):
            p = fma32(xp[:, None, c * LANES:(c + 1) * LANES], wp[None, :, c * LANES:(c + 1) * LANES],
                      p)
        h = LANES // 2
        while h >= 1:
            p[..., :h] = p[..., :h] + p[..., h:2 * h]
            h //= 2
    return p[..., 0]


def same_bits(a, b):
    """Equal float32 bits, or both NaN."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    return a.shape == b.shape and bool(np.all((a.view(np.uint32) == b.view(np.uint32)) |
                                              (np.isnan(a) & np.isnan(b))))


BLAS_MIN_ROWS = 32  # op/matmul.h kBlasMinRows
BLAS_CHUNK = 1024  # op/matmul.h kBlasChunk


def blas_mismatches(d, w, rng, m=BLAS_MIN_ROWS + 1, **kw):
    """gemm="blas" (the prefill path: the dequantized tiles through the
    OpenBLAS's sgemm) on Dequantizer d against the float64 product
    with w ([N, K] float32 as the matmul sees W): every output within
    gamma(K + ceil(K / BLAS_CHUNK)) * sum |x w| (op/matmul.h), the same bits
    for 1, 2 and 3 threads, X float32, float16 and bfloat16. A build without the BLAS
    must refuse it by name. kw: matmul's weight= / expert=. Returns the
    failing cases."""
    bad = []
    x = rng.standard_normal((m, w.shape[1])).astype(np.float32)
    if _nibble_blas() is None:
        try:
            d.matmul(x, gemm="blas", **kw)
            bad.append("gemm=blas without the BLAS: not refused")
        except ValueError as err:
            if "built without its BLAS" not in str(err):
                bad.append("gemm=blas without the BLAS: %s" % err)
        return bad
    k = w.shape[1]
    j = k + -(-k // BLAS_CHUNK)
    gamma = j * 2.0 ** -24 / (1 - j * 2.0 ** -24)
    w64 = w.astype(np.float64)
    xb = (x.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 bits
    xbv = (xb.astype(np.uint32) << 16).view(np.float32)
    for xin, xv, xkw in ((x, x, {}), (x.astype(np.float16), x.astype(np.float16), {}),
                         (xb, xbv, {"x_dtype": "bfloat16"})):
        x64 = xv.astype(np.float64)
        ys = [d.matmul(xin, gemm="blas", threads=t, **xkw, **kw) for t in (1, 2, 3)]
        y1 = ys[0].astype(np.float64)
        with np.errstate(all="ignore"):
            exact = x64 @ w64.T
            bound = gamma * (np.abs(x64) @ np.abs(w64).T)
            within = (np.abs(y1 - exact) <= bound) | ~np.isfinite(exact)
        if not np.all(within):
            bad.append("gemm=blas x=%s%s: outside the bound" % (xin.dtype, xkw))
        if not all(same_bits(y.astype(np.float32), ys[0].astype(np.float32)) for y in ys[1:]):
            bad.append("gemm=blas x=%s%s: threads differ" % (xin.dtype, xkw))
    return bad


def _nibble_blas():
    import nibble
    return nibble.blas()


def matmul_mismatches(f, name, rng, ms=(1, 3), w=None):
    """Checkpoint f's matmul on its 2-D tensor `name` (prepared as float32)
    against dot_ref on the tensor read as float32 (or w), bit for bit, for
    each M in ms, X float32, bfloat16 (its values) and float16, 1 and 2
    threads; and the BLAS path (blas_mismatches).
    Returns the failing cases (empty: all equal)."""
    if w is None:
        w = np.asarray(f.get_tensor(name, dtype="f32"), np.float32)
    d = f.dequantizer(name, dtype="f32")
    bad = []
    for m in ms:
        x = rng.standard_normal((m, w.shape[1])).astype(np.float32)
        xb = (x.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 bits (truncated: any value)
        xbv = (xb.astype(np.uint32) << 16).view(np.float32)
        xh = x.astype(np.float16)
        for xin, xv, kw in ((x, x, {}), (xb, xbv, {"x_dtype": "bfloat16"}),
                            (xh, xh.astype(np.float32), {})):
            want = dot_ref(xv, w)
            for t in (1, 2):
                if not same_bits(d.matmul(xin, threads=t, **kw), want):
                    bad.append("m=%d x=%s threads=%d" % (m, xin.dtype, t))
    return bad + blas_mismatches(d, w, rng)


def expert_matmul_mismatches(f, name, rng, w3=None, ms=(1, 3)):
    """Checkpoint f's matmul on each expert of its 3-D tensor `name` [E, A,
    B] (prepared as float32) against dot_ref on that expert's matrix W_e
    (the tensor read as float32, or w3), bit for bit: weight="out_in" (x
    [M, B] @ W_e.T) and "in_out" (x [M, A] @ W_e), 1 and 2 threads; and a
    3-D weight without an expert refused. Returns the failing cases."""
    if w3 is None:
        w3 = np.asarray(f.get_tensor(name, dtype="f32"), np.float32)
    d = f.dequantizer(name, dtype="f32")
    bad = []
    for e in range(w3.shape[0]):
        for weight, rows in (("out_in", w3[e]), ("in_out", w3[e].T)):
            rows = np.ascontiguousarray(rows, np.float32)
            for m in ms:
                x = rng.standard_normal((m, rows.shape[1])).astype(np.float32)
                want = dot_ref(x, rows)
                for t in (1, 2):
                    if not same_bits(d.matmul(x, weight=weight, expert=e, threads=t), want):
                        bad.append("expert=%d weight=%s m=%d threads=%d" % (e, weight, m, t))
            bad += ["expert=%d weight=%s %s" % (e, weight, b)
                    for b in blas_mismatches(d, rows, rng, weight=weight, expert=e)]
    try:
        d.matmul(np.zeros((1, w3.shape[2]), np.float32))
        bad.append("no expert: not refused")
    except ValueError as err:
        if "pick one" not in str(err):
            bad.append("no expert: %s" % err)
    return bad
