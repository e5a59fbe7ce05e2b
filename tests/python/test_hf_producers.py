"""HF checkpoints as each producer writes them -> `nibble dequant` -> a model folder.

Every checkpoint here is written the way its producer's own code packs it
(AutoGPTQ's OR-packed v1 zero points, GPTQModel's word-wise v2 -> v1
subtraction, GPTQ 8-bit, AWQ symmetric with stored zeros, compressed-tensors
pack-quantized asymmetric with g_idx, bitsandbytes NF4 / FP4 with double
quantization), converted by the CLI, read back with a few lines of json +
numpy (no nibble code), and compared with a numpy decoder written after each
producer's loader. Usage: test_hf_producers.py NIBBLE_CLI WORK_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not importable by " + sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matmul_util import matmul_mismatches  # noqa: E402
from safetensors_util import write_st  # noqa: E402
from packing_util import pack_cols, pack_rows, unpack_cols  # noqa: E402

nibble_cli, work = sys.argv[1], sys.argv[2]
# The Python API is checked too when the module is importable (PYTHONPATH),
# with torch when Debian's python3-torch is installed.
try:
    import nibble
except ImportError:
    nibble = None
try:
    import torch
except ImportError:
    torch = None
print("nibble module: %s, torch: %s" % (nibble is not None and nibble.__file__,
                                        torch is not None and torch.__version__))
passed = failed = 0


def check(name, cond):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name)


# ---------------------------------------------------------- safetensors --
ST = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8,
      "I8": np.int8}


def read_st(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        raw = data[8 + n + b:8 + n + en]
        if e["dtype"] == "BF16":
            u = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
            out[name] = u.view(np.float32).reshape(e["shape"])
        else:
            out[name] = np.frombuffer(raw, ST[e["dtype"]]).reshape(e["shape"])
    return out


def bf16(x):
    """float32 -> bfloat16 bits (round to nearest even)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


rng = np.random.default_rng(7)
N, K = 64, 128  # a Linear's [out, in]


def float_extras():
    """The unquantized tensors of a tiny Llama-shaped model."""
    return {"model.embed_tokens.weight": ("F16", rng.standard_normal((32, K)).astype(np.float16)),
            "model.norm.weight": ("F16", (1 + 0.1 * rng.standard_normal(K)).astype(np.float16)),
            "model.layers.0.input_layernorm.weight": ("F32", np.ones(K, np.float32))}


def folder(name, tensors, quant_config, quantize_config=None, metadata=None):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": K,
           "torch_dtype": "float16", "quantization_config": quant_config}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    if quantize_config is not None:
        with open(os.path.join(d, "quantize_config.json"), "w") as f:
            json.dump(quantize_config, f)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        f.write('{"model": {"type": "BPE"}}')
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        f.write('{"bos_token_id": 1}')
    tensors = dict(tensors)
    tensors.update(float_extras())
    write_st(os.path.join(d, "model.safetensors"), tensors, metadata)
    return d, tensors


def convert(src, dtype, extra=()):
    out = src + "-out-" + dtype
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([nibble_cli, "dequant", src, out, "--dtype", dtype, "--quiet", *extra],
                       capture_output=True, text=True)
    return r, out


def compare_folder(label, src, tensors, want, dtype="f32", extra=()):
    """Converts, reads the folder back, compares every tensor."""
    r, out = convert(src, dtype, extra)
    check(label + ": exit 0 (" + r.stderr.strip() + ")", r.returncode == 0)
    if r.returncode != 0:
        return
    got = read_st(os.path.join(out, "model.safetensors"))
    cfg = json.load(open(os.path.join(out, "config.json")))
    check(label + ": config without quantization_config", "quantization_config" not in cfg)
    check(label + ": torch_dtype", cfg.get("torch_dtype") == {"f32": "float32", "bf16": "bfloat16",
                                                              "f16": "float16"}[dtype])
    check(label + ": tokenizer copied", open(os.path.join(out, "tokenizer.json")).read() ==
          '{"model": {"type": "BPE"}}')
    check(label + ": generation_config copied",
          os.path.exists(os.path.join(out, "generation_config.json")))
    for name, (st, arr) in tensors.items():
        if name.endswith(("norm.weight", "embed_tokens.weight")):
            want[name] = arr.astype(np.float32)
    check(label + ": tensor names " + str(sorted(got)), sorted(got) == sorted(want))
    for name, w in want.items():
        g = got.get(name)
        if g is None:
            continue
        w32 = np.asarray(w, np.float32)
        if dtype == "bf16":
            w32 = bf16_value(bf16(w32))
        elif dtype == "f16":
            w32 = w32.astype(np.float16).astype(np.float32)
        same = g.shape == w32.shape and np.array_equal(g.astype(np.float32).view(np.uint32),
                                                      w32.view(np.uint32))
        check(label + ": " + name + " equals the producer's loader", same)
    if nibble is not None:
        check_python_api(label, src, want, dtype, extra)


def check_python_api(label, src, want, dtype, extra):
    """nibble.open(src) gives the same values as the producer's loader: numpy
    (bfloat16 as uint16 bits), torch when importable, whole and row slices."""
    opts = dict(zip(extra[::2], extra[1::2]))
    kw = {"gptq_format": opts.get("--gptq-format"), "gptq_v1_zeros": opts.get("--gptq-v1-zeros")}
    label = label + " (nibble.open)"
    with nibble.open(src, **kw) as f:
        check(label + ": keys", sorted(f.keys()) == sorted(want))
        for name, w in want.items():
            w32 = np.asarray(w, np.float32)
            if dtype == "bf16":
                w_bits = bf16(w32)
            elif dtype == "f16":
                w_bits = w32.astype(np.float16).view(np.uint16)
            else:
                w_bits = w32.view(np.uint32)
            g = f.get_tensor(name, dtype=dtype)
            g_bits = g.view(w_bits.dtype)
            check(label + ": " + name, g.shape == w32.shape and np.array_equal(g_bits, w_bits))
            rows = w32.shape[0]
            part = f.get_slice(name, dtype=dtype)[rows // 3: rows - 1]
            check(label + ": " + name + " rows", np.array_equal(part.view(w_bits.dtype),
                                                             w_bits[rows // 3: rows - 1]))
            if dtype == "f32" and w32.ndim == 2 and f.info(name)["quantized"]:
                # The matmul on this layout, against the producer's values.
                bad = matmul_mismatches(f, name, np.random.default_rng(rows), w=w32)
                check(label + ": " + name + " matmul, bit for bit " + str(bad), not bad)
    if torch is not None:
        with nibble.open(src, framework="pt", **kw) as f:
            for name, w in want.items():
                t = f.get_tensor(name, dtype=dtype)
                want_dtype = {"f32": torch.float32, "f16": torch.float16,
                              "bf16": torch.bfloat16}[dtype]
                w_t = torch.from_numpy(np.asarray(w, np.float32)).to(want_dtype)
                check(label + ": torch " + name, t.dtype == want_dtype and torch.equal(t, w_t))


def gptq_case(label, bits, G, producer, v2, sym=False, act_order=False, extra=()):
    mx = (1 << bits) - 1
    groups = K // G
    q = rng.integers(0, mx + 1, (K, N))
    z = np.full((groups, N), 1 << (bits - 1)) if sym else rng.integers(0, mx + 1, (groups, N))
    z[0, :8] = 0  # the edge case: z = 0 in v1
    z[1 % groups, 8:16] = mx
    scales = (0.01 + 0.02 * rng.random((groups, N))).astype(np.float16)
    g_idx = (np.arange(K) // G).astype(np.int32)
    if act_order:
        g_idx = rng.permutation(g_idx).astype(np.int32)
    if v2:
        qzeros = pack_cols(z, bits)
    elif producer == "autogptq":
        # AutoGPTQ: zeros -= 1 as uint32, OR-ed into the word (z = 0 -> 0xFFFFFFFF).
        zm = (z - 1).astype(np.int64) & 0xFFFFFFFF
        f = 32 // bits
        w = np.zeros((groups, N // f), np.uint64)
        for j in range(f):
            w |= (zm[:, j::f].astype(np.uint64) << np.uint64(bits * j)) & np.uint64(0xFFFFFFFF)
        qzeros = w.astype(np.uint32).view(np.int32)
    else:
        # GPTQModel: v2 words minus 0x11111111 (4-bit) with borrows.
        ones = {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}[bits]
        qzeros = ((pack_cols(z, bits).view(np.uint32).astype(np.int64) - ones) & 0xFFFFFFFF) \
            .astype(np.uint32).view(np.int32)
    p = "model.layers.0.self_attn.q_proj"
    t = {p + ".qweight": ("I32", pack_rows(q, bits)), p + ".qzeros": ("I32", qzeros),
         p + ".scales": ("F16", scales), p + ".g_idx": ("I32", g_idx),
         p + ".bias": ("F16", rng.standard_normal(N).astype(np.float16))}
    qc = {"quant_method": "gptq", "bits": bits, "group_size": G, "desc_act": act_order,
          "sym": sym, "checkpoint_format": "gptq_v2" if v2 else "gptq"}
    if producer == "gptqmodel":
        qc["meta"] = {"quantizer": ["gptqmodel:2.2.0"]}
    d, tensors = folder(label, t, qc)
    # The producer's loader.
    zq = qzeros
    if v2:
        zl = unpack_cols(zq, bits)
    elif producer == "autogptq":
        # AutoGPTQ's default loader (qlinear_cuda_old, exllama):
        # (zeros + 1) & (2^bits - 1) — a stored 15 (z = 0 written) is 0.
        zl = (unpack_cols(zq, bits) + 1) & mx
        if "autogptq-cuda" in extra:
            zl = unpack_cols(zq, bits) + 1  # its qlinear_cuda path: no wrap, 15 -> 16
    else:
        ones = {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}[bits]
        zl = unpack_cols(((zq.view(np.uint32).astype(np.int64) + ones) & 0xFFFFFFFF)
                         .astype(np.uint32).view(np.int32), bits)
    w = scales.astype(np.float32)[g_idx] * (q - zl[g_idx]).astype(np.float32)  # [K, N]
    want = {p + ".weight": w.T.copy(), p + ".bias": t[p + ".bias"][1].astype(np.float32)}
    compare_folder(label, d, tensors, want, extra=extra)
    return d


gptq_case("gptq-autogptq-v1", 4, 32, "autogptq", v2=False)
gptq_case("gptq-autogptq-v1-cuda", 4, 32, "autogptq", v2=False,
          extra=("--gptq-v1-zeros", "autogptq-cuda"))
gptq_case("gptq-gptqmodel-v1", 4, 32, "gptqmodel", v2=False)
gptq_case("gptq-gptqmodel-v2-actorder", 4, 32, "gptqmodel", v2=True, act_order=True)
gptq_case("gptq-8bit-v1", 8, 64, "autogptq", v2=False, act_order=True)
gptq_case("gptq-8bit-gptqmodel-v1", 8, 32, "gptqmodel", v2=False)
gptq_case("gptq-2bit-v2", 2, 64, "gptqmodel", v2=True)

# A lone v2 safetensors file: the format is stated nowhere -> refused; the
# safetensors metadata or --gptq-format decides it.
d = os.path.join(work, "gptq-gptqmodel-v2-actorder")
lone = os.path.join(work, "lone")
shutil.rmtree(lone, ignore_errors=True)
os.makedirs(lone)
shutil.copy(os.path.join(d, "model.safetensors"), os.path.join(lone, "w.safetensors"))
r = subprocess.run([nibble_cli, "dequant", os.path.join(lone, "w.safetensors"),
                    os.path.join(lone, "o.safetensors")], capture_output=True, text=True)
check("lone GPTQ file refused", r.returncode == 1 and "--gptq-format" in r.stderr and
      not os.path.exists(os.path.join(lone, "o.safetensors")))
r = subprocess.run([nibble_cli, "dequant", os.path.join(lone, "w.safetensors"),
                    os.path.join(lone, "o.safetensors"), "--gptq-format", "v2", "--quiet"],
                   capture_output=True, text=True)
check("lone GPTQ file with --gptq-format v2", r.returncode == 0)
ref = read_st(os.path.join(d + "-out-f32", "model.safetensors"))
got = read_st(os.path.join(lone, "o.safetensors"))
p = "model.layers.0.self_attn.q_proj.weight"
check("lone file == folder (f16 default vs f32)",
      np.array_equal(got[p].astype(np.float32), ref[p].astype(np.float16).astype(np.float32)))
r = subprocess.run([nibble_cli, "inspect", os.path.join(work, "gptq-gptqmodel-v1")],
                   capture_output=True, text=True)
check("inspect shows the v1 rule", "GPTQModel rule" in r.stdout)

# AWQ with zero_point false (GPTQModel keeps qzeros of 8).
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble i holds column 8c + AWQ_ORDER[i]
G = 32
q = rng.integers(0, 16, (K, N))
z = np.full((K // G, N), 8)
scales = (0.01 + 0.02 * rng.random((K // G, N))).astype(np.float16)
p = "model.layers.0.mlp.up_proj"
t = {p + ".qweight": ("I32", pack_cols(q, 4, AWQ_ORDER)),
     p + ".qzeros": ("I32", pack_cols(z, 4, AWQ_ORDER)), p + ".scales": ("F16", scales)}
d, tensors = folder("awq-sym", t, {"quant_method": "awq", "bits": 4, "group_size": G,
                                   "version": "gemm", "zero_point": False})
w = scales.astype(np.float32)[np.arange(K) // G] * (q - 8).astype(np.float32)
compare_folder("awq zero_point false", d, tensors, {p + ".weight": w.T.copy()})

# compressed-tensors pack-quantized, asymmetric, group 32, act-order g_idx,
# bf16 scales.
G = 32
qs = rng.integers(-8, 8, (N, K))
zp = rng.integers(-8, 8, (N, K // G))
sc_bits = bf16(0.01 + 0.02 * rng.random((N, K // G)))
g_idx = rng.permutation(np.arange(K) // G).astype(np.int32)
p = "model.layers.0.mlp.down_proj"
t = {p + ".weight_packed": ("I32", pack_cols(qs + 8, 4)),
     p + ".weight_scale": ("BF16", sc_bits),
     p + ".weight_zero_point": ("I32", pack_rows(zp + 8, 4)),
     p + ".weight_shape": ("I64", np.array([N, K], np.int64)),
     p + ".weight_g_idx": ("I32", g_idx)}




ctcfg = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
             "num_bits": 4, "type": "int", "symmetric": False, "strategy": "group",
             "group_size": G, "actorder": "group"}}}}
d, tensors = folder("ct-asym-gidx", t, ctcfg)
s = bf16_value(sc_bits)[:, g_idx]
w = ((qs - zp[:, g_idx]).astype(np.float32) * s)  # one float32 product: exact, rounded at output
compare_folder("compressed-tensors asym g_idx", d, tensors, {p + ".weight": w}, dtype="bf16")
compare_folder("compressed-tensors asym g_idx f32", d, tensors, {p + ".weight": w}, dtype="f32")

# compressed-tensors W8A16 channel-wise symmetric.
q8 = rng.integers(-128, 128, (N, K))
sc = (0.001 + 0.002 * rng.random((N, 1))).astype(np.float16)
t = {p + ".weight_packed": ("I32", pack_cols(q8 + 128, 8)), p + ".weight_scale": ("F16", sc),
     p + ".weight_shape": ("I64", np.array([N, K], np.int64))}
ctcfg8 = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {
    "group_0": {"targets": ["re:.*down_proj"], "weights": {
        "num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel"}}}}
d, tensors = folder("ct-w8a16", t, ctcfg8)
compare_folder("compressed-tensors W8A16 channel", d, tensors,
               {p + ".weight": q8.astype(np.float32) * sc.astype(np.float32)})

# bitsandbytes 4-bit with double quantization.
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
                0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], np.float32)
FP4 = np.array([0, 0.0052083333, 0.6666667, 1.0, 0.3333333, 0.5, 0.1666667, 0.25,
                -0.0, -0.0052083333, -0.6666667, -1.0, -0.3333333, -0.5, -0.1666667, -0.25],
               np.float32)


def bnb_case(label, table, qtype, nested, dtype_name):
    bs, nbs = 64, 256
    n = N * K
    codes = rng.integers(0, 16, n)
    packed = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8).reshape(-1, 1)  # high first
    blocks = n // bs
    p = "model.layers.0.mlp.gate_proj.weight"
    t = {p: ("U8", packed), p + ".quant_map": ("F32", table)}
    state = {"quant_type": qtype, "blocksize": bs, "dtype": dtype_name, "shape": [N, K]}
    if nested:
        nq = rng.integers(0, 256, blocks).astype(np.uint8)
        nmap = np.sort(rng.random(256).astype(np.float32) * 2 - 1)
        nabs = (0.01 + 0.01 * rng.random((blocks + nbs - 1) // nbs)).astype(np.float32)
        offset = np.float32(0.0213)
        absmax = (nmap[nq] * nabs[np.arange(blocks) // nbs]).astype(np.float32) + offset
        t.update({p + ".absmax": ("U8", nq), p + ".nested_absmax": ("F32", nabs),
                  p + ".nested_quant_map": ("F32", nmap)})
        state.update({"nested_blocksize": nbs, "nested_dtype": "float32",
                      "nested_offset": float(offset)})
    else:
        absmax = (0.01 + 0.05 * rng.random(blocks)).astype(np.float32)
        t[p + ".absmax"] = ("F32", absmax)
    js = np.frombuffer(json.dumps(state).encode(), np.uint8)
    t[p + ".quant_state.bitsandbytes__" + qtype] = ("U8", js)
    d, tensors = folder(label, t, {"quant_method": "bitsandbytes", "load_in_4bit": True,
                                   "bnb_4bit_quant_type": qtype,
                                   "bnb_4bit_use_double_quant": nested})
    w = (table[codes] * absmax[np.arange(n) // bs]).astype(np.float32).reshape(N, K)
    compare_folder(label, d, tensors, {p: w}, dtype="bf16")
    compare_folder(label + " f32", d, tensors, {p: w}, dtype="f32")


bnb_case("bnb-nf4-double", NF4, "nf4", True, "bfloat16")
bnb_case("bnb-fp4", FP4, "fp4", False, "float16")

# Bad variants: a clear error, nothing written.
p = "model.layers.0.mlp.down_proj"
bad = {p + ".weight_packed": ("I32", pack_cols(qs + 8, 4)[:, :-1]),
       p + ".weight_scale": ("BF16", sc_bits),
       p + ".weight_zero_point": ("I32", pack_rows(zp + 8, 4)),
       p + ".weight_shape": ("I64", np.array([N, K], np.int64))}
d, _ = folder("ct-bad-shape", bad, ctcfg)
r, out = convert(d, "f32")
check("wrong weight_packed shape refused: " + r.stderr.strip(),
      r.returncode == 1 and "does not match weight_shape" in r.stderr and not os.path.exists(out))
del bad[p + ".weight_scale"]
d, _ = folder("ct-no-scale", bad, ctcfg)
r, out = convert(d, "f32")
check("missing weight_scale refused: " + r.stderr.strip(),
      r.returncode == 1 and "weight_scale' is missing" in r.stderr and not os.path.exists(out))

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
