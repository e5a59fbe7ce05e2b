"""Never a copied quantization parameter: every quantization method nibble
lists, with an unknown sibling / a float8 weight / an integer tensor / MXFP4
blocks planted in it, through the CLI (dequant, inspect) and nibble.open.

Each planted tensor must be refused by name (exit 1, nothing written) or, when
left out with --exclude, absent from the output; the method's own layer and
the float tensors beside it convert as usual. Without a quantization_config a
lone float8 tensor is a float tensor: copied, and converted exactly on request
(checked against a numpy decoder of every e4m3fn / e5m2 code).
Usage: test_trust.py NIBBLE_CLI WORK_DIR
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

cli, work = sys.argv[1], sys.argv[2]
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


def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


def t(dtype, arr):
    arr = np.ascontiguousarray(arr)
    return (dtype, arr.shape, arr.tobytes())


rng = np.random.default_rng(3)
N, K = 16, 32
L = "model.layers.0."
f16 = lambda *s: t("F16", (0.05 * rng.standard_normal(s)).astype(np.float16))


def floats():
    """The float tensors of a tiny model: always copied."""
    return {"model.norm.weight": f16(K), L + "input_layernorm.weight": f16(K),
            "lm_head.weight": f16(N, K)}


# Each method: its config (None = no quantization_config) and one valid layer
# of its own layout at L + "self_attn.q_proj", and whether nibble reads it.
gptq_words = rng.integers(0, 2**31, size=(K // 8, N), dtype=np.int64).astype(np.int32)
METHODS = {
    "none": (None, {L + "self_attn.q_proj.weight": f16(N, K)}, True),
    "gptq": ({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": True,
              "checkpoint_format": "gptq"},
             {L + "self_attn.q_proj.qweight": t("I32", gptq_words),
              L + "self_attn.q_proj.scales": f16(1, N),
              L + "self_attn.q_proj.qzeros": t("I32", np.full((1, N // 8), 0x77777777, np.int32)),
              L + "self_attn.q_proj.g_idx": t("I32", np.zeros(K, np.int32))}, True),
    "awq": ({"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm",
             "zero_point": True},
            {L + "self_attn.q_proj.qweight": t("I32", gptq_words.reshape(K, N // 8)),
             L + "self_attn.q_proj.qzeros": t("I32", np.full((1, N // 8), 0x88888888 - 2**32,
                                                             np.int64).astype(np.int32)),
             L + "self_attn.q_proj.scales": f16(1, N)}, True),
    "compressed-tensors pack-quantized": (
        {"quant_method": "compressed-tensors", "format": "pack-quantized",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
             "num_bits": 4, "type": "int", "strategy": "channel", "symmetric": True}}}},
        {L + "self_attn.q_proj.weight_packed": t("I32", gptq_words.reshape(N, K // 8)),
         L + "self_attn.q_proj.weight_scale": f16(N, 1),
         L + "self_attn.q_proj.weight_shape": t("I64", np.array([N, K], np.int64))}, True),
    "compressed-tensors int-quantized": (
        {"quant_method": "compressed-tensors", "format": "int-quantized",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
             "num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}}}},
        {L + "self_attn.q_proj.weight": t("I8", rng.integers(-128, 128, (N, K), np.int8)),
         L + "self_attn.q_proj.weight_scale": f16(N, 1)}, True),
    # llm-compressor's FP8_DYNAMIC preset (the pass-through this file guards).
    "compressed-tensors float-quantized": (
        {"quant_method": "compressed-tensors", "format": "float-quantized",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
             "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}}}},
        {L + "self_attn.q_proj.weight": t("F8_E4M3", rng.integers(0, 0x7e, (N, K), np.uint8)),
         L + "self_attn.q_proj.weight_scale": t("BF16", np.full((N, 1), 0x3c00, np.uint16))},
        True),
    "fp8 (DeepSeek blocks)": (
        {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"},
        {L + "self_attn.q_proj.weight": t("F8_E4M3", rng.integers(0, 0x7e, (N, K), np.uint8)),
         L + "self_attn.q_proj.weight_scale_inv": t("F32", np.ones(
             (-(-N // 128), -(-K // 128)), np.float32))}, True),
    "mxfp4 (gpt-oss)": (
        {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]},
        {L + "mlp.experts.gate_up_proj_blocks": t("U8", rng.integers(0, 256, (2, N, 1, 16),
                                                                       np.uint8)),
         L + "mlp.experts.gate_up_proj_scales": t("U8", np.full((2, N, 1), 127, np.uint8))},
        True),
    "bitsandbytes 4-bit": (
        {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
        {L + "self_attn.q_proj.weight": t("U8", rng.integers(0, 256, (N * K // 2, 1), np.uint8)),
         L + "self_attn.q_proj.weight.absmax": t("F32", np.ones(N * K // 64, np.float32)),
         L + "self_attn.q_proj.weight.quant_map": t("F32", np.linspace(-1, 1, 16, dtype=np.float32)),
         L + "self_attn.q_proj.weight.quant_state.bitsandbytes__nf4": t("U8", np.frombuffer(
             json.dumps({"quant_type": "nf4", "blocksize": 64, "dtype": "float16",
                         "shape": [N, K]}).encode(), np.uint8))}, True),
    "bitsandbytes 8-bit": (
        {"quant_method": "bitsandbytes", "load_in_8bit": True},
        {L + "self_attn.q_proj.weight": t("I8", rng.integers(-128, 128, (N, K), np.int8)),
         L + "self_attn.q_proj.SCB": t("F32", np.ones(N, np.float32)),
         L + "self_attn.q_proj.weight_format": t("U8", np.zeros((), np.uint8))}, True),
}

# Plants a method reads as its own layer (correctly: test_float_formats.py
# checks the values), not refused under that method's config.
READ_BY = {("compressed-tensors float-quantized", "a float8 weight with its scale"),
           ("fp8 (DeepSeek blocks)", "a float8 weight with its scale"),
           ("mxfp4 (gpt-oss)", "MXFP4 blocks and scales")}

# What is planted, and the names nibble must refuse (per config: True = under
# a quantization_config; "always" = with or without one).
PLANTS = {
    "an unknown sibling (FP8 scale_inv beside a float weight)": (
        {L + "mlp.up_proj.weight": f16(N, K),
         L + "mlp.up_proj.weight_scale_inv": t("F32", np.ones((1, 1), np.float32))},
        "always", [L + "mlp.up_proj.weight", L + "mlp.up_proj.weight_scale_inv"]),
    "a float8 weight": (
        {L + "mlp.down_proj.weight": t("F8_E4M3", rng.integers(0, 0x7e, (N, K), np.uint8))},
        True, [L + "mlp.down_proj.weight"]),
    "a float8 weight with its scale": (
        {L + "mlp.gate_proj.weight": t("F8_E4M3", rng.integers(0, 0x7e, (N, K), np.uint8)),
         L + "mlp.gate_proj.weight_scale": t("BF16", np.full((N, 1), 0x3c00, np.uint16))},
        "always", [L + "mlp.gate_proj.weight"]),
    "an integer tensor": (
        {L + "self_attn.o_proj.weight": t("I8", rng.integers(-128, 128, (N, K), np.int8))},
        True, [L + "self_attn.o_proj.weight"]),
    "MXFP4 blocks and scales": (
        {L + "mlp.experts.down_proj_blocks": t("U8", rng.integers(0, 256, (2, N, 1, 16), np.uint8)),
         L + "mlp.experts.down_proj_scales": t("U8", np.full((2, N, 1), 127, np.uint8)),
         L + "mlp.experts.down_proj_bias": f16(2, N)},
        "always", [L + "mlp.experts.down_proj_blocks", L + "mlp.experts.down_proj_scales"]),
}


def make(name, config, tensors):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "float16"}
    if config is not None:
        cfg["quantization_config"] = config
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_st(os.path.join(d, "model.safetensors"), tensors)
    return d


def run(*args):
    p = subprocess.run([cli] + list(args), capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout + p.stderr


def regex_of(names):
    return "^(" + "|".join(n.replace(".", "\\.") for n in names) + ")"


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
for mi, (method, (config, layer, readable)) in enumerate(METHODS.items()):
    base = L + ("mlp.experts.gate_up_proj" if "mxfp4" in method else "self_attn.q_proj")
    for pi, (plant, (extra, when, refused)) in enumerate(PLANTS.items()):
        case = "%s + %s" % (method, plant)
        expect_refused = refused if (when == "always" or config is not None) else []
        if (method, plant) in READ_BY:
            expect_refused = []
        d = make("m%d_p%d" % (mi, pi), config, {**floats(), **layer, **extra})
        out = os.path.join(work, "m%d_p%d.out" % (mi, pi))
        # The listing: every planted tensor to refuse is unsupported (and
        # counted as quantized), the floats are copies.
        rc, text = run("inspect", d, "--format", "json")
        check(case + ": inspect exit 0 (" + text[-300:] + ")", rc == 0)
        listed = {x["source"]: x for x in json.loads(text)["tensors"]} if rc == 0 else {}
        for n in expect_refused:
            x = listed.get(n, {})
            check(case + ": inspect lists %s as unsupported %s" % (n, x),
                  x.get("supported") is False and x.get("quantized") is True and
                  len(x.get("why_not", "")) > 20)
        for n in floats():
            check(case + ": %s is a copy" % n, listed.get(n, {}).get("kind") == "copy")
        # dequant: refused by name, nothing written.
        rc, text = run("dequant", d, out)
        unsupported_base = [] if readable else [base]
        if expect_refused or unsupported_base:
            check(case + ": dequant refuses (exit %d: %s)" % (rc, text[-300:]), rc == 1)
            first = (expect_refused + unsupported_base)
            check(case + ": the error names a refused tensor: " + text[-300:],
                  any("'" + n + "'" in text or "'" + n.rsplit(".", 1)[0] in text for n in first))
            check(case + ": nothing written", not os.path.exists(out) and
                  not any(".nibble-tmp-" in e for e in os.listdir(work)))
        shutil.rmtree(out, ignore_errors=True)
        # Left out by --exclude: converts; no refused name in the output.
        excl = expect_refused + unsupported_base
        args = ["dequant", d, out, "--quiet"]
        if excl:
            args += ["--exclude", regex_of([n if n != base else base + "." for n in excl])]
        rc, text = run(*args)
        check(case + ": with --exclude, dequant works (%d: %s)" % (rc, text[-300:]), rc == 0)
        if rc == 0:
            got = read_st(os.path.join(out, "model.safetensors"))
            for n in excl:
                check(case + ": %s not in the output" % n,
                      not any(k == n or k.startswith(n + ".") for k in got))
            for k, (dtype, _, _) in got.items():
                check(case + ": output %s is a float type, not %s" % (k, dtype),
                      dtype in ("F16", "BF16", "F32") or (config is None and dtype in ("F8_E4M3", "I8")))
            with open(os.path.join(out, "config.json")) as f:
                check(case + ": config.json has no quantization_config",
                      "quantization_config" not in json.load(f))
            shutil.rmtree(out)
        # nibble.open: the same verdicts; reading a refused tensor raises.
        if nibble is not None:
            with nibble.open(d) as f:
                for n in expect_refused:
                    check(case + ": nibble.open info(%s) unsupported" % n,
                          f.info(n)["supported"] is False)
                    try:
                        f.get_tensor(n)
                        check(case + ": get_tensor(%s) raised" % n, False)
                    except ValueError as e:
                        check(case + ": get_tensor error names %s: %s" % (n, e),
                              n.rsplit(".", 1)[0] in str(e))


# --- float8 copies without a quantization_config: exact conversion ---------
def e4m3fn(code):
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return float("nan")
    return s * (m / 8.0 * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))


def e5m2(code):
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 2) & 31, code & 3
    if e == 31:
        return s * float("inf") if m == 0 else float("nan")
    return s * (m / 4.0 * 2.0 ** -14 if e == 0 else (1 + m / 4.0) * 2.0 ** (e - 15))


codes = np.arange(256, dtype=np.uint8).reshape(16, 16)
d = make("float8_plain", None, {**floats(), "model.f8a": t("F8_E4M3", codes),
                                "model.f8b": t("F8_E5M2", codes)})
for dtype, st_dtype, np_dtype in (("f32", "F32", np.float32), ("f16", "F16", np.float16),
                                  ("bf16", "BF16", None)):
    out = os.path.join(work, "float8_plain_" + dtype + ".safetensors")
    rc, text = run("dequant", d, out, "--dtype", dtype, "--quiet")
    check("float8 copies convert to " + dtype + " (" + text[-200:] + ")", rc == 0)
    if rc != 0:
        continue
    got = read_st(out)
    for name, dec in (("model.f8a", e4m3fn), ("model.f8b", e5m2)):
        want = np.array([dec(c) for c in range(256)], np.float64)
        gdt, shape, raw = got[name]
        if np_dtype is None:
            vals = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            vals = np.frombuffer(raw, np_dtype)
        vals = vals.astype(np.float64)
        same = np.where(np.isnan(want), np.isnan(vals), vals == want)
        check("%s -> %s: dtype %s shape %s, every code exact (%d wrong)" %
              (name, dtype, gdt, shape, int((~same).sum())),
              gdt == st_dtype and shape == [16, 16] and same.all())
if nibble is not None:
    with nibble.open(d) as f:
        a = f.get_tensor("model.f8a", dtype="f32")
        want = np.array([e4m3fn(c) for c in range(256)], np.float32).reshape(16, 16)
        check("nibble.open: float8 get_tensor(dtype='f32') exact",
              np.array_equal(np.isnan(a), np.isnan(want)) and
              np.array_equal(a[~np.isnan(a)], want[~np.isnan(want)]))
        try:
            f.get_tensor("model.f8a")
            check("nibble.open: float8 without a dtype raises", False)
        except ValueError as e:
            check("float8 without a dtype: ValueError naming the tensor and the fix (%s)" % e,
                  "model.f8a" in str(e) and "dtype=" in str(e))

print("trust: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
