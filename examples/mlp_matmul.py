"""A llama MLP block (SiLU-gated: down(silu(gate(x)) * up(x))) whose three
matmuls run through nibble straight from a quantized checkpoint — a GGUF
file (Q4_0 / Q4_K / any block type), a GPTQ (act-order too), AWQ,
compressed-tensors, bitsandbytes or FP8 folder — compared with numpy on the
dequantized weights in float64. A GGUF MoE layer (ffn_gate_inp router,
ffn_{gate,up,down}_exps experts: Mixtral, Qwen-MoE, DeepSeek's routed
experts) runs as a MoE block instead: softmax router, top-k experts per
token, each expert's tokens multiplied by that expert's matrices only
(`matmul(..., expert=e)`).

    python3 examples/mlp_matmul.py CHECKPOINT [--layer L] [--tokens M] [--top-k K]
                                   [--gemm exact|blas]

Each weight is prepared once (`Checkpoint.dequantizer`: its packed inputs
read and lowered) and then multiplied as often as a runtime needs
(`Dequantizer.matmul`: the float weight is never written out). `--gemm
blas` is the prefill path: from 32 tokens the dequantized tiles go through
OpenBLAS's sgemm (`nibble.blas()`), about 2x faster there. Exits 1 when
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


MOE = {  # a GGUF MoE layer: the router and the stacked experts [E, N, K]
    "router": "blk.{l}.ffn_gate_inp.weight",
    "gate": "blk.{l}.ffn_gate_exps.weight",
    "up": "blk.{l}.ffn_up_exps.weight",
    "down": "blk.{l}.ffn_down_exps.weight",
}


def silu(v):
    return v / (1 + np.exp(-v))


def route(logits, top_k):
    """Softmax over the experts, the top-k per token, their weights
    renormalized (Mixtral's routing): (experts [M, k], weights [M, k])."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    top = np.argsort(-p, axis=1, kind="stable")[:, :top_k]
    w = np.take_along_axis(p, top, axis=1)
    return top, w / w.sum(axis=1, keepdims=True)


def moe_block(f, names, x, top_k, gemm="exact"):
    """The MoE block through nibble: per expert, its routed tokens times its
    own gate / up / down matrices. Returns (Y, the numpy float64 Y, ms)."""
    router = np.asarray(f.get_tensor(names["router"], dtype="f32"), np.float32)
    w = {role: f.dequantizer(names[role], dtype="f32") for role in ("gate", "up", "down")}
    experts, weights = route(x @ router.T, top_k)
    t0 = time.perf_counter()
    y = np.zeros((x.shape[0], w["down"].shape[1]), np.float32)
    for e in np.unique(experts):
        rows, slot = np.nonzero(experts == e)
        xe = np.ascontiguousarray(x[rows])
        h = (silu(w["gate"].matmul(xe, expert=int(e), gemm=gemm)) *
             w["up"].matmul(xe, expert=int(e), gemm=gemm))
        ye = w["down"].matmul(h.astype(np.float32), expert=int(e), gemm=gemm)
        y[rows] += weights[rows, slot][:, None].astype(np.float32) * ye
    ran = time.perf_counter() - t0
    wd = {role: np.asarray(f.get_tensor(names[role], dtype="f32"), np.float64)
          for role in ("gate", "up", "down")}
    x64 = x.astype(np.float64)
    y64 = np.zeros(y.shape)
    for i in range(x.shape[0]):
        for e, g in zip(experts[i], weights[i]):
            h = silu(x64[i] @ wd["gate"][e].T) * (x64[i] @ wd["up"][e].T)
            y64[i] += g * (h @ wd["down"][e].T)
    return y, y64, ran


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--layer", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=4, help="rows of X (M)")
    ap.add_argument("--top-k", type=int, default=2, help="experts per token (MoE layers)")
    ap.add_argument("--gemm", choices=("exact", "blas"), default="exact",
                    help="exact: the fixed-order dot; blas: OpenBLAS sgemm from 32 tokens")
    a = ap.parse_args()
    with nibble.open(a.checkpoint) as f:
        moe = {role: n.format(l=a.layer) for role, n in MOE.items()}
        if all(n in f for n in moe.values()):
            hidden = f.info(moe["gate"])["shape"][2]
            x = np.random.default_rng(0).standard_normal((a.tokens, hidden)).astype(np.float32)
            y, y64, ran = moe_block(f, moe, x, a.top_k, a.gemm)
            err = float(np.max(np.abs(y - y64)) / max(np.max(np.abs(y64)), 1e-30))
            print("MoE block of layer %d (%d experts, top %d): X [%d, %d] -> Y %s"
                  % (a.layer, f.info(moe["gate"])["shape"][0], a.top_k, a.tokens, hidden,
                     list(y.shape)))
            print("expert matmuls in %.2f ms; max |Y - numpy| / max |numpy| = %.2e"
                  % (ran * 1e3, err))
            return 0 if err <= 1e-4 else 1
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
        h = (silu(w["gate"].matmul(x, gemm=a.gemm)) *
             w["up"].matmul(x, gemm=a.gemm)).astype(np.float32)
        y = w["down"].matmul(h, gemm=a.gemm)
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
