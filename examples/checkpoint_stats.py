"""Opens a checkpoint with nibble's Python API, lists its tensors and prints
the statistics of one of them (default: the first quantized one).

    pip install .          # from the nibble repository
    python3 examples/checkpoint_stats.py model.gguf [TENSOR] [--torch]

With --torch the tensor is read as a torch.bfloat16 tensor (zero-copy) and
the statistics are computed by torch.
"""
import argparse
import sys

import nibble


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("tensor", nargs="?")
    ap.add_argument("--torch", action="store_true", help="read as torch.bfloat16")
    args = ap.parse_args()
    try:
        f = nibble.open(args.checkpoint, framework="pt" if args.torch else "np")
    except (ValueError, ImportError) as e:
        print("checkpoint_stats: %s" % e, file=sys.stderr)
        return 1
    with f:
        print("%s: %s" % (args.checkpoint, f.description()))
        pick = args.tensor
        if pick is not None and pick not in f:
            print("checkpoint_stats: no tensor named '%s'" % pick, file=sys.stderr)
            return 1
        for name in f.keys():
            t = f.info(name)
            print("  %-40s %-6s [%s]%s" % (name, t["kind"], ", ".join(map(str, t["shape"])),
                                          "" if t["supported"] else "  (not supported)"))
            if pick is None and args.tensor is None and t["quantized"] and t["supported"]:
                pick = name
        if pick is None:
            print("no quantized tensor to read")
            return 0
        if args.torch:
            w = f.get_tensor(pick, dtype="bf16").float()
            n, mean, std = w.numel(), w.mean().item(), w.std(unbiased=False).item()
            lo, hi = w.min().item(), w.max().item()
            kind = "torch.bfloat16"
        else:
            w = f.get_tensor(pick, dtype="f32").astype("float64")
            n, mean, std, lo, hi = w.size, w.mean(), w.std(), w.min(), w.max()
            kind = "float32"
        print("%s: %d values, mean %.6g, std %.6g, min %.6g, max %.6g (%s)" %
              (f.info(pick)["name"], n, mean, std, lo, hi, kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
