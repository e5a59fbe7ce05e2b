"""nibble's matmul against ONNX Runtime's MatMulNBits on the same int4
weight, side by side in one run, interleaved: the table of issue 50.

The weight: N x K float32 (seeded normal x 0.02) quantized symmetric int4,
blocks of 128 along K, zero point 8 — MatMulNBits' B [N, K/128, 64] uint8
(low nibble first) with its scales [N, K/128] and no zero_points input
(ONNX Runtime's default 8); the very same bytes are an ONNX
DequantizeLinear uint4 weight [N, K] blocked along K, which nibble reads
through Dequantizer.onnx. Y = X · Wᵀ, X float32 [M, K] (a fixed pseudo-
random activation in [-1, 1), the same in both engines).

ONNX Runtime: MatMulNBits (com.microsoft) as the only node of a model whose
B and scales are initializers (so ONNX Runtime prepacks them at load),
accuracy_level 0 (float32 compute) and 4 (int8-quantized activations),
intra-op threads = the row's threads, run from `onnxruntime-node` by
bench/ort/ort_worker.js (a benchmark-only dependency, never a build one:
`cd bench/ort && npm install --ignore-scripts onnxruntime-node`). Its times
include one session.run call's overhead, measured on its own (an Identity
model of the same output size) and reported in `ort_call_ms`.

nibble: Dequantizer.matmul(x, threads=T) from Python (the GIL released);
from M = 32, when the build has its BLAS (nibble.blas()), also the prefill
path matmul(..., gemm="blas"), in `nibble_blas_ms`.
Both report the median of REPS runs of each (engine, shape, M, threads),
engines alternating run by run. `read_ms` is the time to read the packed
weight once (numpy summing its bytes as uint64, best of REPS, as many
threads: reported for 1 thread only) — the memory floor at M = 1.

Usage: PYTHONPATH=build/python python3 bench/matmul_vs_ort.py
         [--shapes 4096x4096,11008x4096,4096x14336] [--m 1,4,16,128]
         [--threads 1,2] [--reps 15] > rows.jsonl
One JSON row per (shape, M, threads); a table on stderr.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

# Idle OpenMP threads sleep instead of spinning (as ONNX Runtime's, see
# ort_worker.js), so that neither engine's idle threads slow the other's
# runs; set before libgomp loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

import nibble  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


# --- a minimal protobuf writer (ONNX's ModelProto) -------------------------
def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def _int(field, v):
    return _key(field, 0) + _varint(v)


def _bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return _key(field, 2) + _varint(len(b)) + b


def _tensor(name, dtype_id, dims, raw):
    return b"".join(_int(1, d) for d in dims) + _int(2, dtype_id) + _bytes(8, name) + \
        _bytes(9, raw)


def _value_info(name, dims):
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d))
                     for d in dims)
    tensor_type = _int(1, 1) + _bytes(2, shape)  # FLOAT
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def _attr_int(name, v):
    return _bytes(1, name) + _int(3, v) + _int(20, 2)  # type INT


def _model(node, inits, inputs, outputs):
    graph = _bytes(1, node) + _bytes(2, "g") + b"".join(_bytes(5, t) for t in inits) + \
        b"".join(_bytes(11, v) for v in inputs) + b"".join(_bytes(12, v) for v in outputs)
    opsets = _bytes(8, _bytes(1, "") + _int(2, 21)) + \
        _bytes(8, _bytes(1, "com.microsoft") + _int(2, 1))
    return _int(1, 10) + opsets + _bytes(7, graph)


def matmulnbits_model(path, b, scales, n, k, block, level):
    node = _bytes(1, "A") + _bytes(1, "B") + _bytes(1, "scales") + _bytes(2, "Y") + \
        _bytes(3, "mmnb") + _bytes(4, "MatMulNBits") + _bytes(7, "com.microsoft") + \
        _bytes(5, _attr_int("K", k)) + _bytes(5, _attr_int("N", n)) + \
        _bytes(5, _attr_int("bits", 4)) + _bytes(5, _attr_int("block_size", block)) + \
        _bytes(5, _attr_int("accuracy_level", level))
    inits = [_tensor("B", 2, list(b.shape), b.tobytes()),  # UINT8
             _tensor("scales", 1, list(scales.shape), scales.tobytes())]
    with open(path, "wb") as f:
        f.write(_model(node, inits, [_value_info("A", ["M", k])], [_value_info("Y", ["M", n])]))


def identity_model(path, n):
    node = _bytes(1, "A") + _bytes(2, "Y") + _bytes(4, "Identity")
    with open(path, "wb") as f:
        f.write(_model(node, [], [_value_info("A", ["M", n])], [_value_info("Y", ["M", n])]))


# --- the ONNX Runtime worker ----------------------------------------------
class Ort:
    def __init__(self):
        env = dict(os.environ)
        env["NODE_PATH"] = os.pathsep.join(
            p for p in [env.get("NODE_PATH", ""), os.path.join(HERE, "ort", "node_modules")] if p)
        self.p = subprocess.Popen(["node", os.path.join(HERE, "ort", "ort_worker.js")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                  text=True)

    def ask(self, **req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            sys.exit("onnxruntime-node worker died: is onnxruntime-node installed? "
                     "(cd bench/ort && npm install --ignore-scripts onnxruntime-node)")
        ans = json.loads(line)
        if "error" in ans:
            sys.exit("onnxruntime-node: " + ans["error"])
        return ans


def lcg_activation(m, k):
    """ort_worker.js's activation, bit for bit."""
    n = m * k
    v = 12345
    out = np.empty(n, np.float64)
    for i in range(n):
        v = (v * 48271) % 2147483647
        out[i] = v / 1073741824 - 1
    return out.astype(np.float32).reshape(m, k)


def median(ts):
    ts = sorted(ts)
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="4096x4096,11008x4096,4096x14336")
    ap.add_argument("--m", default="1,4,16,128")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    ms = [int(v) for v in args.m.split(",")]
    threads = [int(v) for v in args.threads.split(",")]
    block = 128
    ort = Ort()
    tmp = tempfile.mkdtemp(prefix="nibble-ort-")
    rng = np.random.default_rng(0)
    xs = {}
    rows = []
    for n, k in shapes:
        w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
        wb = w.reshape(n, k // block, block)
        scales = (np.abs(wb).max(axis=2) / 7).astype(np.float32)
        scales[scales == 0] = 1
        q = np.clip(np.rint(wb / scales[..., None]), -8, 7).astype(np.int64) + 8
        q = q.reshape(n, k).astype(np.uint8)
        packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)  # [N, K/2]
        b = packed.reshape(n, k // block, block // 2)
        zp = np.full((n, k // block // 2 + (k // block) % 2), 0x88, np.uint8)
        d = nibble.Dequantizer.onnx(packed, scales, zp, axis=1, block_size=block,
                                    x_dtype="uint4", shape=[n, k])
        wd = d.run()
        ids = {}
        for t in threads:
            for level in (0, 4):
                path = os.path.join(tmp, "mmnb_%dx%d_l%d.onnx" % (n, k, level))
                if not os.path.exists(path):
                    matmulnbits_model(path, b, scales, n, k, block, level)
                ids[(t, level)] = "%dx%d_l%d_t%d" % (n, k, level, t)
                ver = ort.ask(op="load", id=ids[(t, level)], path=path, threads=t)["version"]
            ids[(t, "id")] = "id%d_t%d" % (n, t)
            path = os.path.join(tmp, "identity_%d.onnx" % n)
            if not os.path.exists(path):
                identity_model(path, n)
            ort.ask(op="load", id=ids[(t, "id")], path=path, threads=t)
        # The packed weight read once (the M = 1 floor), one thread.
        pv = packed.view(np.uint64) if packed.nbytes % 8 == 0 else packed
        read = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            pv.sum()
            read.append(time.perf_counter() - t0)
        read_ms = min(read) * 1e3
        for m in ms:
            if (m, k) not in xs:
                xs[(m, k)] = lcg_activation(m, k)
            x = xs[(m, k)]
            ref = x.astype(np.float64) @ wd.astype(np.float64).T
            for t in threads:
                times = {"nibble": [], "blas": [], 0: [], 4: [], "id": []}
                use_blas = nibble.blas() is not None and m >= 32
                ys = {}
                reps = args.reps if m <= 16 else max(3, args.reps // 3)
                for _ in range(reps):  # interleaved, one run of each per round
                    t0 = time.perf_counter()
                    y = d.matmul(x, threads=t)
                    times["nibble"].append((time.perf_counter() - t0) * 1e3)
                    ys["nibble"] = y
                    if use_blas:
                        t0 = time.perf_counter()
                        ys["blas"] = d.matmul(x, threads=t, gemm="blas")
                        times["blas"].append((time.perf_counter() - t0) * 1e3)
                    for level in (0, 4, "id"):
                        a = ort.ask(op="time", id=ids[(t, level)], m=m, k=k if level != "id"
                                    else n, reps=1)
                        times[level] += a["ms"]
                        if level != "id":
                            ys[level] = np.array(a["y"], np.float64)
                scale = np.abs(ref[0, :8]).max()
                row = {
                    "n": n, "k": k, "m": m, "threads": t, "layout": "int4 block 128 (MatMulNBits)",
                    "nibble_ms": round(median(times["nibble"]), 4),
                    "ort_level0_ms": round(median(times[0]), 4),
                    "ort_level4_ms": round(median(times[4]), 4),
                    "ort_call_ms": round(median(times["id"]), 4),
                    "read_ms_1thread": round(read_ms, 4),
                    "packed_bytes": int(packed.nbytes),
                    "nibble_max_rel_err": float(np.abs(ys["nibble"] - ref).max() /
                                                np.abs(ref).max()),
                    "ort_level0_max_rel_err_row0": float(np.abs(ys[0] - ref[0, :8]).max() / scale),
                    "ort_level4_max_rel_err_row0": float(np.abs(ys[4] - ref[0, :8]).max() / scale),
                    "target": nibble.active_target(), "onnxruntime": ver,
                }
                if use_blas:
                    row["nibble_blas_ms"] = round(median(times["blas"]), 4)
                    row["nibble_blas_max_rel_err"] = float(np.abs(ys["blas"] - ref).max() /
                                                           np.abs(ref).max())
                    row["blas"] = nibble.blas()
                rows.append(row)
                print(json.dumps(row), flush=True)
                print("%5dx%-5d M=%-4d thr=%d  nibble %8.3f ms   ORT L0 %8.3f ms   ORT L4 %8.3f "
                      "ms   (ORT call %.3f, read %.3f)  L0/nibble %.2f  L4/nibble %.2f" % (
                          n, k, m, t, row["nibble_ms"], row["ort_level0_ms"],
                          row["ort_level4_ms"], row["ort_call_ms"], read_ms,
                          row["ort_level0_ms"] / row["nibble_ms"],
                          row["ort_level4_ms"] / row["nibble_ms"]) +
                      ("   nibble blas %8.3f ms  L0/blas %.2f  L4/blas %.2f" % (
                          row["nibble_blas_ms"], row["ort_level0_ms"] / row["nibble_blas_ms"],
                          row["ort_level4_ms"] / row["nibble_blas_ms"]) if use_blas else ""),
                      file=sys.stderr, flush=True)
    ort.p.stdin.close()
    ort.p.wait()


if __name__ == "__main__":
    main()
