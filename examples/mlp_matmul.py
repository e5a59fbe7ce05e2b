"""A llama MLP block (SiLU-gated: down(silu(gate(x)) * up(x))) whose three
matmuls run through nibble straight from a quantized checkpoint — a GGUF
file (Q4_0 / Q4_K / any block type), a GPTQ (act-order too), AWQ,
compressed-tensors, bitsandbytes or FP8 folder — compared with numpy on the
dequantized weights in float64.

    python3 examples/mlp_matmul.py CHECKPOINT [--layer L] [--tokens M]

Each weight is prepared once (`Checkpoint.dequantizer`: its packed inputs
read and lowered) and then multiplied as often as a runtime needs
(`Dequantizer.matmul`: the float weight is never written out). Exits 1 when
the block's output differs from numpy's by more than 1e-4 of its largest
value.
"""
import argparse
import sys
import time

import numpy as np

import nibble

NAMES = {  # the block's weights under GGUF and Hugging Face names
    "gate": ("blk.{l}.ffn_gate.weight", "model.layers.{l}.mlp.gate_proj.weight"),
    "up": ("blk.{l}.ffn_up.weight", "model.layers.{l}.mlp.up_proj.weight"),
    "down": ("blk.{l}.ffn_down.weight", "model.layers.{l}.mlp.down_proj.weight"),
}


def silu(v):
    return v / (1 + np.exp(-v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--layer", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=4, help="rows of X (M)")
    a = ap.parse_args()
    with nibble.open(a.checkpoint) as f:
        names = {}
        for role, spellings in NAMES.items():
            found = [s.format(l=a.layer) for s in spellings if s.format(l=a.layer) in f]
            if not found:
                print("no %s weight of layer %d in %s" % (role, a.layer, a.checkpoint))
                return 2
            names[role] = found[0]
        t0 = time.perf_counter()
        w = {role: f.dequantizer(name, dtype="f32") for role, name in names.items()}
        prepared = time.perf_counter() - t0
        hidden = w["gate"].shape[1]
        x = np.random.default_rng(0).standard_normal((a.tokens, hidden)).astype(np.float32)
        t0 = time.perf_counter()
        h = (silu(w["gate"].matmul(x)) * w["up"].matmul(x)).astype(np.float32)
        y = w["down"].matmul(h)
        ran = time.perf_counter() - t0
        # numpy on the dequantized weights, in float64.
        wd = {role: np.asarray(f.get_tensor(name, dtype="f32"), np.float64)
              for role, name in names.items()}
    x64 = x.astype(np.float64)
    y64 = (silu(x64 @ wd["gate"].T) * (x64 @ wd["up"].T)) @ wd["down"].T
    err = float(np.max(np.abs(y - y64)) / max(np.max(np.abs(y64)), 1e-30))
    kinds = ", ".join("%s %s" % (role, name) for role, name in names.items())
    print("MLP of layer %d (%s): X [%d, %d] -> Y %s" % (a.layer, kinds, a.tokens, hidden,
                                                        list(y.shape)))
    print("prepared in %.2f ms, three matmuls in %.2f ms; max |Y - numpy| / max |numpy| = %.2e"
          % (prepared * 1e3, ran * 1e3, err))
    return 0 if err <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
