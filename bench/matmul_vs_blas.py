"""nibble's matmul on a packed int4 weight against a BLAS GEMM (numpy's
`x @ W.T`, i.e. the BLAS numpy links: OpenBLAS on Debian when
libopenblas0 is installed) on the same weight already dequantized to
float32. One thread each: run with OPENBLAS_NUM_THREADS=1. Median of REPS.

Usage: OPENBLAS_NUM_THREADS=1 PYTHONPATH=build/python python3 bench/matmul_vs_blas.py [M ...]
"""
import json
import sys
import time

import numpy as np

import nibble


def median_ms(f, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def main():
    ms = [int(a) for a in sys.argv[1:]] or [1, 16, 128, 512]
    rng = np.random.default_rng(0)
    n = k = 4096
    w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
    q = nibble.quantize(w, bits=4, group_size=128)
    d = nibble.Dequantizer.pmx(q["x"], q["scale"], group_size=128)
    wd = d.run()
    blas = [c for c in np.__config__.__dict__.get("blas_opt_info", {}).get("libraries", [])]
    for m in ms:
        x = rng.standard_normal((m, k)).astype(np.float32)
        reps = 30 if m <= 16 else 5
        a = median_ms(lambda: d.matmul(x, threads=1), reps)
        b = median_ms(lambda: x @ wd.T, reps)
        print(json.dumps({"m": m, "n": n, "k": k, "layout": "pmx int4x4 G128", "threads": 1,
                          "nibble_ms": round(a, 3), "blas_on_dequantized_ms": round(b, 3),
                          "nibble_over_blas_speed": round(b / a, 3),
                          "packed_gb_s": round(q["x"].nbytes / a / 1e6, 2),
                          "numpy_blas": blas, "target": nibble.active_target()}), flush=True)


if __name__ == "__main__":
    main()
