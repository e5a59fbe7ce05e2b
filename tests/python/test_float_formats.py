"""Float-quantized checkpoints (FP8 / NVFP4) -> `nibble dequant` -> a model folder.

Each checkpoint is written the way its producer lays it out, converted by the
CLI, read back with json + numpy (no nibble code) and compared with a numpy
decoder written from the producer's own code:
  - HF `quant_method: "fp8"` (DeepSeek-V3 / Qwen3-FP8): DeepSeek's
    `inference/kernel.py` weight_dequant — float32(e4m3) * weight_scale_inv
    of the 128 x 128 block, in float32, then the output type;
  - compressed-tensors `float-quantized`: `_dequantize`'s
    `x_q.to(scale.dtype) * scale` — the product rounded to the scale's type;
  - compressed-tensors `nvfp4-pack-quantized`: NVFP4PackedCompressor's
    decompress_weight — e2m1 (low nibble first) * (float32(e4m3 scale) /
    global_scale) in float32, rounded to bfloat16.
Bad variants must fail with exit 1 and write nothing.
Usage: test_float_formats.py NIBBLE_CLI WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not importable by " + sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matmul_util import expert_matmul_mismatches, matmul_mismatches  # noqa: E402
from safetensors_util import write_st, read_st, bf16_bits, bf16_value  # noqa: E402

nibble_cli, work = sys.argv[1], sys.argv[2]
try:
    import nibble
except ImportError:
    nibble = None
passed = failed = 0


def check(name, cond):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name)


rng = np.random.default_rng(11)


# -------------------------------------------------- independent decoders --
def e4m3fn(codes):
    """float8_e4m3fn bits -> float32 (OCP FP8: bias 7, no inf, S.1111.111 NaN)."""
    c = codes.astype(np.int64)
    s = np.where(c & 0x80, -1.0, 1.0)
    e = (c >> 3) & 0xF
    m = c & 0x7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
    v = np.where((c & 0x7F) == 0x7F, np.nan, v)
    return (s * v).astype(np.float32)


E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)


def e2m1_unpack(packed, n, k):
    """compressed-tensors unpack_fp4_from_uint8: low nibble first."""
    flat = packed.reshape(-1)
    nib = np.stack([flat & 0xF, flat >> 4], axis=1).reshape(-1)
    vals = E2M1[nib & 7] * np.where(nib & 8, -1.0, 1.0).astype(np.float32)
    return vals.reshape(n, k).astype(np.float32)


def f8_codes(shape):
    """Random float8_e4m3fn codes without NaN."""
    c = rng.integers(0, 256, size=shape, dtype=np.uint8)
    return np.where((c & 0x7F) == 0x7F, c ^ 1, c).astype(np.uint8)


def expand(grid, n, k, bn, bk):
    return np.repeat(np.repeat(grid, bn, axis=0), bk, axis=1)[:n, :k]


def as_dtype(v32, dtype):
    """float32 values -> the comparison form of output `dtype`."""
    if dtype == "bf16":
        return bf16_value(bf16_bits(v32))
    if dtype == "f16":
        with np.errstate(over="ignore"):
            return v32.astype(np.float16).astype(np.float32)
    return v32


def through(v32, product, dtype):
    """The value rounded to `product` first (compressed-tensors), then to dtype."""
    if product == "bf16":
        v32 = bf16_value(bf16_bits(v32))
    elif product == "f16":
        v32 = v32.astype(np.float16).astype(np.float32)
    return as_dtype(v32, dtype)


def same(a, b):
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


# ------------------------------------------------------------- folders --
def folder(name, shards, config, extra_files=True):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f)
    if extra_files:
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            f.write('{"model": {"type": "BPE"}}')
    if len(shards) == 1:
        write_st(os.path.join(d, "model.safetensors"), shards[0])
    else:
        wm = {}
        for i, t in enumerate(shards):
            fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
            write_st(os.path.join(d, fn), t)
            for n in t:
                wm[n] = fn
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wm}, f)
    return d


def read_folder(d):
    out = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            out.update(read_st(os.path.join(d, fn)))
    return out


def convert(src, dtype, out=None):
    out = out or src + "-out-" + (dtype or "default")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [nibble_cli, "dequant", src, out, "--quiet"] + (["--dtype", dtype] if dtype else [])
    return subprocess.run(cmd, capture_output=True, text=True), out


def compare(label, src, want_fn, dtypes, removed, kept):
    for dtype in dtypes:
        r, out = convert(src, dtype)
        check("%s %s: exit 0 (%s)" % (label, dtype, r.stderr.strip()), r.returncode == 0)
        if r.returncode != 0:
            continue
        got = read_folder(out)
        for name, want in want_fn(dtype or "default").items():
            check("%s %s: %s present" % (label, dtype, name), name in got)
            if name in got:
                ok = same(got[name], want)
                check("%s %s: %s exact" % (label, dtype, name), ok)
                if not ok and got[name].shape == want.shape:
                    bad = np.flatnonzero(got[name].view(np.uint32) != want.view(np.uint32))
                    print("  %d differ, first at %d: %r vs %r" %
                          (bad.size, bad[0], got[name].reshape(-1)[bad[0]],
                           want.reshape(-1)[bad[0]]))
        for name in removed:
            check("%s %s: %s dropped" % (label, dtype, name), name not in got)
        for name in kept:
            check("%s %s: %s kept" % (label, dtype, name), name in got)
        with open(os.path.join(out, "config.json")) as f:
            cfg = json.load(f)
        check(label + ": quantization_config removed", "quantization_config" not in cfg)
        check(label + ": tokenizer copied", os.path.exists(os.path.join(out, "tokenizer.json")))
        if nibble is not None and dtype:
            with nibble.open(src) as f:
                for name, want in want_fn(dtype).items():
                    g = f.get_tensor(name, dtype=dtype)
                    if dtype == "bf16":
                        v = bf16_value(g.view(np.uint16))
                    else:
                        v = g.astype(np.float32)
                    check("%s %s: nibble.open %s exact" % (label, dtype, name), same(v, want))
                    if dtype == "f32" and want.ndim == 2 and f.info(name)["quantized"]:
                        # The matmul on this layout, against these values.
                        bad = matmul_mismatches(f, name, np.random.default_rng(want.shape[0]),
                                                w=np.asarray(want, np.float32))
                        check("%s: %s matmul, bit for bit %s" % (label, name, bad), not bad)
                    if dtype == "f32" and want.ndim == 3 and f.info(name)["quantized"]:
                        # MoE experts: the matmul on each expert's matrix.
                        bad = expert_matmul_mismatches(f, name, np.random.default_rng(7),
                                                       w3=np.asarray(want, np.float32))
                        check("%s: %s expert matmul, bit for bit %s" % (label, name, bad),
                              not bad)
                    rows = want.shape[0]
                    part = f.get_slice(name, dtype=dtype)[rows // 3: rows - 1]
                    check("%s %s: nibble.open %s rows" % (label, dtype, name),
                          np.array_equal(part.view(g.dtype), g[rows // 3: rows - 1]))


def refuses(label, src, needle):
    r, out = convert(src, "bf16")
    check("%s: exit 1 (got %d)" % (label, r.returncode), r.returncode == 1)
    check("%s: message names the problem (%s)" % (label, r.stderr.strip()), needle in r.stderr)
    check("%s: nothing written" % label, not os.path.exists(out))
    leftovers = [f for f in os.listdir(work) if ".nibble-tmp-" in f]
    check("%s: no temporaries left (%s)" % (label, leftovers), not leftovers)


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16"}

# --------------------------------------- HF fp8 (DeepSeek / Qwen3-FP8) --
N, K, B = 200, 300, 128  # not block multiples: the edge blocks are partial
gr, gc = -(-N // B), -(-K // B)
q_codes = f8_codes((N, K))
o_codes = f8_codes((K, N))
q_inv = (rng.random((gr, gc)) * 1e-3 + 1e-5).astype(np.float32)
o_inv = (rng.random((-(-K // B), -(-N // B))) * 1e-3).astype(np.float32)
lm_head = bf16_bits(rng.standard_normal((16, K)).astype(np.float32))
embed = bf16_bits(rng.standard_normal((16, K)).astype(np.float32))
fp8_cfg = dict(LLAMA, quantization_config={
    "quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
    "weight_block_size": [B, B], "modules_to_not_convert": ["lm_head"]})
shards = [
    {"model.layers.0.self_attn.q_proj.weight": ("F8_E4M3", q_codes),
     "model.layers.0.self_attn.q_proj.weight_scale_inv": ("F32", q_inv),
     "model.embed_tokens.weight": ("BF16", embed)},
    {"model.layers.0.self_attn.o_proj.weight": ("F8_E4M3", o_codes),
     "model.layers.0.self_attn.o_proj.weight_scale_inv": ("F32", o_inv),
     "lm_head.weight": ("BF16", lm_head)},
]
src = folder("fp8-deepseek", shards, fp8_cfg)


def fp8_want(dtype):
    d = "bf16" if dtype == "default" else dtype
    return {
        "model.layers.0.self_attn.q_proj.weight":
            as_dtype(e4m3fn(q_codes) * expand(q_inv, N, K, B, B), d),
        "model.layers.0.self_attn.o_proj.weight":
            as_dtype(e4m3fn(o_codes) * expand(o_inv, K, N, B, B), d),
        "lm_head.weight": as_dtype(bf16_value(lm_head), d),
    }


# The test tells the rules apart: rounding the scale to bfloat16 first (some
# CPU ports) gives other bits here.
check("fp8: scale-to-bf16-first differs from DeepSeek's rule", not same(
    as_dtype(e4m3fn(q_codes) * expand(bf16_value(bf16_bits(q_inv)), N, K, B, B), "bf16"),
    fp8_want("bf16")["model.layers.0.self_attn.q_proj.weight"]))
compare("fp8", src, fp8_want, [None, "bf16", "f32", "f16"],
        ["model.layers.0.self_attn.q_proj.weight_scale_inv"], ["model.embed_tokens.weight"])
r, out = convert(src, "bf16")
if r.returncode == 0:
    check("fp8: every tensor written, no companion", sorted(read_folder(out)) == sorted(
        ["model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight",
         "model.embed_tokens.weight", "lm_head.weight"]))
r = subprocess.run([nibble_cli, "dequant", src, out + "-sharded", "--dtype", "bf16", "--quiet",
                    "--max-shard-size", "100KB"], capture_output=True, text=True)
shutil.rmtree(out + "-sharded", ignore_errors=True)
r = subprocess.run([nibble_cli, "dequant", src, out + "-sharded", "--dtype", "bf16", "--quiet",
                    "--max-shard-size", "100KB"], capture_output=True, text=True)
check("fp8 sharded: exit 0 (%s)" % r.stderr.strip(), r.returncode == 0)
if r.returncode == 0:
    with open(os.path.join(out + "-sharded", "model.safetensors.index.json")) as f:
        wm = json.load(f)["weight_map"]
    check("fp8 sharded: the index lists every tensor", sorted(wm) == sorted(
        ["model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight",
         "model.embed_tokens.weight", "lm_head.weight"]))
    got = read_folder(out + "-sharded")
    check("fp8 sharded: same values", all(same(got[k], v) for k, v in fp8_want("bf16").items()))

# Bad variants: each refused by name, nothing written.
bad = [dict(shards[0]), dict(shards[1])]
bad[0]["model.layers.0.self_attn.q_proj.weight_scale_inv"] = ("F32", q_inv[:, :2].copy())
refuses("fp8 scale shape", folder("fp8-bad-shape", bad, fp8_cfg), "weight_scale_inv")
bad = [dict(shards[0]), dict(shards[1])]
del bad[0]["model.layers.0.self_attn.q_proj.weight_scale_inv"]
refuses("fp8 missing scale", folder("fp8-no-scale", bad, fp8_cfg), "q_proj")
odd = json.loads(json.dumps(fp8_cfg))
odd["quantization_config"]["weight_block_size"] = [128]
refuses("fp8 odd block size", folder("fp8-odd-block", shards, odd), "weight_block_size")
odd["quantization_config"]["weight_block_size"] = [64, 64]
refuses("fp8 other block size", folder("fp8-other-block", shards, odd), "weight_scale_inv")

# ---------------------------------- compressed-tensors float-quantized --
def ct_config(fmt, weights, ignore=("lm_head",)):
    return dict(LLAMA, quantization_config={
        "quant_method": "compressed-tensors", "format": fmt, "ignore": list(ignore),
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                      "input_activations": None}}})


n, k = 96, 160
for strategy, scale_shape, extra, sdt in [
        ("channel", (n, 1), {}, "bf16"),
        ("tensor", (1,), {}, "f32"),
        ("block", (-(-n // 64), -(-k // 64)), {"block_structure": [64, 64]}, "bf16"),
        ("group", (n, k // 32), {"group_size": 32}, "f16")]:
    codes = f8_codes((n, k))
    s32 = (rng.random(scale_shape) * 0.01 + 1e-4).astype(np.float32)
    if sdt == "bf16":
        s_st = ("BF16", bf16_bits(s32))
        s32 = bf16_value(bf16_bits(s32))
    elif sdt == "f16":
        s_st = ("F16", s32.astype(np.float16))
        s32 = s32.astype(np.float16).astype(np.float32)
    else:
        s_st = ("F32", s32)
    if strategy == "block":
        full = expand(s32, n, k, 64, 64)
    elif strategy == "group":
        full = np.repeat(s32, 32, axis=1)
    else:
        full = np.broadcast_to(s32.reshape(-1, 1) if s32.size > 1 else s32, (n, k))
    weights = dict({"num_bits": 8, "type": "float", "symmetric": True, "strategy": strategy,
                    "dynamic": False}, **extra)
    tensors = {"model.layers.0.mlp.up_proj.weight": ("F8_E4M3", codes),
               "model.layers.0.mlp.up_proj.weight_scale": s_st,
               "model.layers.0.mlp.up_proj.input_scale": ("F32", np.ones(1, np.float32)),
               "lm_head.weight": ("BF16", lm_head[:, :k].copy())}
    src = folder("ct-fp8-" + strategy, [tensors], ct_config("float-quantized", weights))
    value = e4m3fn(codes) * full.astype(np.float32)

    def want(dtype, value=value, sdt=sdt):
        d = sdt if dtype == "default" else dtype
        return {"model.layers.0.mlp.up_proj.weight": through(value, sdt, d)}

    if sdt != "f32":
        check("ct %s: the product's rounding shows in float32" % strategy,
              not same(want("f32")["model.layers.0.mlp.up_proj.weight"], value))
    compare("ct float-quantized " + strategy, src, want, [None, "bf16", "f32", "f16"],
            ["model.layers.0.mlp.up_proj.weight_scale", "model.layers.0.mlp.up_proj.input_scale"],
            ["lm_head.weight"])

# ------------------------------------- compressed-tensors NVFP4 (W4A16) --
n, k = 48, 96
packed = rng.integers(0, 256, size=(n, k // 2), dtype=np.uint8)
scale = f8_codes((n, k // 16)) & 0x7F  # positive e4m3 scales
gscale = np.array([448.0 * 6.0 / 3.25], np.float32)
tensors = {"model.layers.0.mlp.down_proj.weight_packed": ("U8", packed),
           "model.layers.0.mlp.down_proj.weight_scale": ("F8_E4M3", scale),
           "model.layers.0.mlp.down_proj.weight_global_scale": ("F32", gscale),
           "model.layers.0.mlp.down_proj.input_global_scale": ("F32", gscale)}
weights = {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group",
           "group_size": 16, "dynamic": False}
src = folder("ct-nvfp4", [tensors], ct_config("nvfp4-pack-quantized", weights))
eff = (e4m3fn(scale) / gscale[0]).astype(np.float32)
nv_value = (e2m1_unpack(packed, n, k) * np.repeat(eff, 16, axis=1)).astype(np.float32)
check("ct nvfp4: the bfloat16 rounding shows in float32",
      not same(through(nv_value, "bf16", "f32"), nv_value))
compare("ct nvfp4", src,
        lambda dtype: {"model.layers.0.mlp.down_proj.weight": through(
            nv_value, "bf16", "bf16" if dtype == "default" else dtype)},
        [None, "bf16", "f32", "f16"], ["model.layers.0.mlp.down_proj.weight_global_scale"], [])
bad = dict(tensors)
bad["model.layers.0.mlp.down_proj.weight_scale"] = ("F8_E4M3", scale[:, :5].copy())
refuses("nvfp4 scale shape", folder("ct-nvfp4-bad", [bad], ct_config("nvfp4-pack-quantized",
                                                                        weights)), "weight_scale")
bad = dict(tensors)
bad["model.layers.0.mlp.down_proj.weight_packed"] = ("U8", packed[:, :47].copy())
bad["model.layers.0.mlp.down_proj.weight_shape"] = ("I64", np.array([n, k], np.int64))
refuses("nvfp4 packed size", folder("ct-nvfp4-bad2", [bad], ct_config("nvfp4-pack-quantized",
                                                                         weights)), "weight_shape")

# ------------------------------------------------------- gpt-oss MXFP4 --
# transformers' convert_moe_packed_tensors: lut[nibble] (low nibble first)
# ldexp'ed by scale - 127, [E, R, G * 32], then transpose(1, 2).
LUT = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)


def mxfp4_reference(blocks, scales):
    e, r, g, b = blocks.shape
    lo, hi = LUT[blocks & 0x0F], LUT[blocks >> 4]
    vals = np.stack([lo, hi], axis=-1).reshape(e, r, g, b * 2)
    with np.errstate(over="ignore", invalid="ignore"):  # (255: inf; 0 * inf: NaN)
        exp = np.power(np.float32(2.0), scales.astype(np.float32) - 127).astype(np.float32)
        vals = (vals * exp[..., None]).astype(np.float32)
    return np.ascontiguousarray(vals.reshape(e, r, g * b * 2).transpose(0, 2, 1))


E, R, G = 3, 40, 3
gu_blocks = rng.integers(0, 256, size=(E, 2 * R, G, 16), dtype=np.uint8)
gu_scales = rng.integers(100, 135, size=(E, 2 * R, G), dtype=np.uint8)
gu_scales[0, 0, 0], gu_scales[1, 2, 1], gu_scales[2, 3, 2] = 0, 200, 255  # 2^-127, 2^73, inf
dn_blocks = rng.integers(0, 256, size=(E, G * 32, R // 32 + 1, 16), dtype=np.uint8)
dn_scales = rng.integers(115, 130, size=(E, G * 32, R // 32 + 1), dtype=np.uint8)
gu_bias = bf16_bits(rng.standard_normal((E, 2 * R)).astype(np.float32))
attn = bf16_bits(rng.standard_normal((32, G * 32)).astype(np.float32))
mx_cfg = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
          "torch_dtype": "bfloat16",
          "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
              "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
              "lm_head"]}}
pre = "model.layers.0.mlp.experts."
tensors = {pre + "gate_up_proj_blocks": ("U8", gu_blocks),
           pre + "gate_up_proj_scales": ("U8", gu_scales),
           pre + "gate_up_proj_bias": ("BF16", gu_bias),
           pre + "down_proj_blocks": ("U8", dn_blocks),
           pre + "down_proj_scales": ("U8", dn_scales),
           "model.layers.0.self_attn.q_proj.weight": ("BF16", attn)}
src = folder("gpt-oss-mxfp4", [tensors], mx_cfg)
gu_value = mxfp4_reference(gu_blocks, gu_scales)
dn_value = mxfp4_reference(dn_blocks, dn_scales)
check("mxfp4: the reference is [E, K, R]", gu_value.shape == (E, G * 32, 2 * R))
compare("mxfp4", src,
        lambda dtype: {pre + "gate_up_proj": as_dtype(gu_value, "bf16" if dtype == "default"
                                                      else dtype),
                       pre + "down_proj": as_dtype(dn_value, "bf16" if dtype == "default"
                                                   else dtype),
                       pre + "gate_up_proj_bias": as_dtype(bf16_value(gu_bias), "bf16"
                                                           if dtype == "default" else dtype)},
        [None, "bf16", "f32", "f16"],
        [pre + "gate_up_proj_blocks", pre + "gate_up_proj_scales"],
        ["model.layers.0.self_attn.q_proj.weight"])
bad = dict(tensors)
bad[pre + "gate_up_proj_scales"] = ("U8", gu_scales[:, :, :2].copy())
refuses("mxfp4 scale shape", folder("gpt-oss-bad", [bad], mx_cfg), "gate_up_proj_scales")
bad = dict(tensors)
del bad[pre + "down_proj_scales"]
refuses("mxfp4 missing scales", folder("gpt-oss-bad2", [bad], mx_cfg), "down_proj_scales")

# ------------------------------------------------ bitsandbytes LLM.int8 --
# bitsandbytes' int8_vectorwise_dequant: A * SCB.view(-1, 1) *
# 7.874015718698502e-3, float32, two roundings; then .to(dtype).
n, k = 40, 72
w8 = rng.integers(-127, 128, size=(n, k), dtype=np.int8)
scb = (rng.random(n) * 4 + 0.01).astype(np.float32)
int8_value = ((w8.astype(np.float32) * scb[:, None]).astype(np.float32) *
              np.float32(7.874015718698502e-3)).astype(np.float32)
check("LLM.int8: the two roundings differ from q * SCB / 127",
      not same(int8_value, (w8.astype(np.float32) * scb[:, None] / np.float32(127))
               .astype(np.float32)))
tensors = {"model.layers.0.mlp.up_proj.weight": ("I8", w8),
           "model.layers.0.mlp.up_proj.SCB": ("F32", scb),
           "model.layers.0.mlp.up_proj.weight_format": ("U8", np.zeros((), np.uint8)),
           "model.norm.weight": ("F16", np.ones(k, np.float16))}
int8_cfg = dict(LLAMA, torch_dtype="float16", quantization_config={
    "quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_threshold": 6.0})
src = folder("bnb-int8", [tensors], int8_cfg)
compare("LLM.int8", src,
        lambda dtype: {"model.layers.0.mlp.up_proj.weight": as_dtype(
            int8_value, "f16" if dtype == "default" else dtype)},
        [None, "bf16", "f32", "f16"],
        ["model.layers.0.mlp.up_proj.SCB", "model.layers.0.mlp.up_proj.weight_format"],
        ["model.norm.weight"])
bad = dict(tensors)
bad["model.layers.0.mlp.up_proj.SCB"] = ("F32", scb[:-1].copy())
refuses("LLM.int8 SCB shape", folder("bnb-int8-bad", [bad], int8_cfg), "SCB")

print("float formats: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
