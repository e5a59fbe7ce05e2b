#!/usr/bin/env python3
"""Peak memory of `nibble fold` and `nibble dequant` stays bounded.

    rss_test.py NIBBLE MAKE_FOLD_MODELS WORKDIR [--dim D]

1. fold: models of 2 and 8 MatMulNBits layers D x D (weights in external
   data) are folded; the 8-layer peak RSS must not exceed the 2-layer one
   by more than 16 MiB (independent of the layer count), and both must stay
   under largest tensor (packed + float) + graph + 64 MiB.
2. dequant: a GGUF file with one 96 MiB F32 tensor (copied through) must
   peak under the tensor's size + 48 MiB (it is read straight into the
   output buffer, never held twice).

Peak RSS is measured per child with wait4(). Prints the figures and
"N passed, M failed".
"""
import os
import shutil
import struct
import subprocess
import sys

MiB = 1 << 20


def peak_rss(argv):
    """(exit status, peak RSS in bytes) of one child."""
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), ru.ru_maxrss * 1024  # Linux: KiB


def main():
    nibble, make_fold, work = sys.argv[1:4]
    dim = int(sys.argv[sys.argv.index("--dim") + 1]) if "--dim" in sys.argv else 4096
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    passed = failed = 0

    def check(name, ok, detail):
        nonlocal passed, failed
        print(("PASS " if ok else "FAIL ") + name + ": " + detail)
        passed, failed = passed + ok, failed + (not ok)

    # 1. fold
    rss = {}
    for layers in (2, 8):
        d = os.path.join(work, f"fold{layers}")
        subprocess.run([make_fold, d, "--large", str(layers), str(dim)], check=True,
                       stdout=subprocess.DEVNULL)
        rc, rss[layers] = peak_rss([nibble, "fold", os.path.join(d, "large.onnx"),
                                    os.path.join(d, "out.onnx"), "--external-data", "--quiet"])
        check(f"fold_{layers}_layers_exit", rc == 0, f"exit {rc}")
        graph = os.path.getsize(os.path.join(d, "large.onnx"))
        packed = dim * (dim // 128) * 64
        bound = packed + dim * dim * 4 + graph + 64 * MiB
        check(f"fold_{layers}_layers_bound", rss[layers] <= bound,
              f"peak RSS {rss[layers] / MiB:.1f} MiB (bound: largest tensor {packed / MiB:.0f} MiB "
              f"packed + {dim * dim * 4 / MiB:.0f} MiB float32, graph {graph / MiB:.1f} MiB, + 64 "
              f"MiB = {bound / MiB:.0f} MiB)")
        shutil.rmtree(d)
    check("fold_rss_independent_of_layers", rss[8] <= rss[2] + 16 * MiB,
          f"8 layers {rss[8] / MiB:.1f} MiB vs 2 layers {rss[2] / MiB:.1f} MiB "
          f"(+{(rss[8] - rss[2]) / MiB:.1f} MiB, allowed +16)")

    # 2. dequant of a GGUF pass-through tensor
    n = 24 * MiB  # floats: 96 MiB
    path = os.path.join(work, "big.gguf")
    with open(path, "wb") as f:
        name = b"big.weight"
        head = b"GGUF" + struct.pack("<IQQ", 3, 1, 0)
        head += struct.pack("<Q", len(name)) + name + struct.pack("<IQIQ", 1, n, 0, 0)
        head += b"\0" * ((32 - len(head) % 32) % 32)
        f.write(head)
        f.truncate(len(head) + 4 * n)  # zeros
    rc, r = peak_rss([nibble, "dequant", path, os.path.join(work, "out.safetensors"), "--quiet"])
    check("dequant_gguf_copy_exit", rc == 0, f"exit {rc}")
    check("dequant_gguf_copy_rss", r <= 4 * n + 48 * MiB,
          f"peak RSS {r / MiB:.1f} MiB for a {4 * n / MiB:.0f} MiB F32 tensor (allowed "
          f"{(4 * n + 48 * MiB) / MiB:.0f})")
    shutil.rmtree(work)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
