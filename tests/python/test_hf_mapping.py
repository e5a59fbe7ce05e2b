"""`nibble dequant IN.gguf OUT/ --hf` against an independent numpy mapping.

For each architecture --hf maps, the test makes a small Hugging Face model
(random float32 weights under transformers' parameter names and shapes),
converts it to GGUF in numpy the way llama.cpp's converter does
(convert_hf_to_gguf.py: gguf-py's tensor names; LlamaModel's permutation of
the q / k rows for RoPE; Mixtral's and Qwen-MoE's experts stacked into
3-D ffn_*_exps tensors; Qwen2-MoE's [1, hidden] shared-expert gate stored
as a vector; Phi-3's fused qkv_proj / gate_up_proj kept as attn_qkv /
ffn_up), writes the GGUF with the metadata llama.cpp writes, runs
`nibble dequant --hf --dtype f32`, and checks that
  - the folder holds exactly the original model's tensor names, and every
    tensor equals the original bit for bit (float32 in, float32 out; a
    float16 copy of the embeddings widens exactly);
  - config.json holds the architecture class and model_type transformers
    uses, and every hyper-parameter as the model had it;
  - a model missing one of its layer's tensors is refused by name.
Nothing here reads nibble's own mapping: the reference is the forward
direction, written from llama.cpp's converter, inverted by nibble.
Usage: test_hf_mapping.py NIBBLE_CLI WORK_DIR
"""
import glob
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError as e:
    print("SKIP: %s (python3-numpy is needed by %s)" % (e, sys.executable))
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_util import kv_bool, kv_f32, kv_str, kv_u32, read_gguf_f32, write_gguf  # noqa: E402
from safetensors_util import bf16_bits, bf16_value, read_st  # noqa: E402

cli, work = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name + (": " + detail if detail else ""))


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

# ------------------------------------------- llama.cpp's converter, forward

# gguf-py's TensorNameMap, the entries these architectures use (HF suffix
# after "model.layers.N." -> GGUF part after "blk.N.").
BLOCK_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "self_attn.qkv_proj": "attn_qkv", "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
    "mlp.gate_up_proj": "ffn_up",  # Phi-3
    "mlp.gate": "ffn_gate_inp", "block_sparse_moe.gate": "ffn_gate_inp",
    "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
    "mlp.shared_expert.down_proj": "ffn_down_shexp",
    "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
}
# Gemma 2 / 3 (gguf-py: ATTN_POST_NORM, FFN_PRE_NORM, FFN_POST_NORM).
GEMMA_NAMES = dict(BLOCK_NAMES, **{"post_attention_layernorm": "post_attention_norm",
                                   "pre_feedforward_layernorm": "ffn_norm",
                                   "post_feedforward_layernorm": "post_ffw_norm"})
# gpt-oss (gguf-py's GPT_OSS tensors).
GPTOSS_NAMES = dict(BLOCK_NAMES, **{"post_attention_layernorm": "post_attention_norm",
                                    "mlp.router": "ffn_gate_inp"})
TOP_NAMES = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
# Experts: HF matrix name -> GGUF stacked part.
EXPERTS = {"w1": "ffn_gate_exps", "w2": "ffn_down_exps", "w3": "ffn_up_exps",
           "gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps",
           "down_proj": "ffn_down_exps"}


def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def gpt_oss_to_gguf(hf, c):
    """convert_hf_to_gguf.py GptOssModel.modify_tensors (float experts), fused
    (fuse_gate_up_exps) or not."""
    out = []
    for name, w in hf.items():
        if name in TOP_NAMES:
            out.append((TOP_NAMES[name], w))
            continue
        parts = name.split(".")
        L = parts[2]
        if name.endswith("self_attn.sinks"):
            out.append(("blk.%s.attn_sinks.weight" % L, w))
        elif name.endswith("experts.down_proj"):
            out.append(("blk.%s.ffn_down_exps.weight" % L, np.ascontiguousarray(w.swapaxes(-1, -2))))
        elif name.endswith("experts.down_proj_bias"):
            out.append(("blk.%s.ffn_down_exps.bias" % L, w))
        elif name.endswith("experts.gate_up_proj_bias"):
            g, u = w[..., ::2], w[..., 1::2]
            if c.get("fuse"):
                out.append(("blk.%s.ffn_gate_up_exps.bias" % L, np.concatenate([g, u], -1)))
            else:
                out += [("blk.%s.ffn_gate_exps.bias" % L, np.ascontiguousarray(g)),
                        ("blk.%s.ffn_up_exps.bias" % L, np.ascontiguousarray(u))]
        elif name.endswith("experts.gate_up_proj"):
            t = w.swapaxes(-1, -2)
            g, u = t[:, ::2, :], t[:, 1::2, :]
            if c.get("fuse"):
                out.append(("blk.%s.ffn_gate_up_exps.weight" % L, np.concatenate([g, u], 1)))
            else:
                out += [("blk.%s.ffn_gate_exps.weight" % L, np.ascontiguousarray(g)),
                        ("blk.%s.ffn_up_exps.weight" % L, np.ascontiguousarray(u))]
        else:
            rest, suffix = ".".join(parts[3:-1]), parts[-1]
            out.append(("blk.%s.%s.%s" % (L, GPTOSS_NAMES[rest], suffix), w))
    return out


def to_gguf(hf, c):
    """The GGUF tensors llama.cpp's converter writes for state dict `hf`."""
    if c.get("moe") == "gptoss":
        return gpt_oss_to_gguf(hf, c)
    out, experts = [], {}
    for name, w in hf.items():
        if name in TOP_NAMES:
            if c.get("gemma") and name.endswith("norm.weight"):
                w = w + np.float32(1)
            out.append((TOP_NAMES[name], w))
            continue
        parts = name.split(".")
        layer, rest, suffix = parts[2], ".".join(parts[3:-1]), parts[-1]
        if ".experts." in name:  # model.layers.L.<block>.experts.E.<w>.weight
            e, mat = int(parts[-3]), parts[-2]
            experts.setdefault((layer, EXPERTS[mat]), {})[e] = w
            continue
        if c["permute"] and suffix == "weight" and rest == "self_attn.q_proj":
            w = permute(w, c["heads"], c["heads"])
        if c["permute"] and suffix == "weight" and rest == "self_attn.k_proj":
            w = permute(w, c["heads"], c["kv_heads"])
        if rest == "mlp.shared_expert_gate":
            w = w.reshape(-1)  # [1, hidden] -> a vector, as llama.cpp stores it
        if c.get("gemma") and name.endswith("norm.weight"):
            w = w + np.float32(1)  # Gemma{2,3}Model.modify_tensors: 1 + w
        names = GEMMA_NAMES if c.get("gemma") else BLOCK_NAMES
        out.append(("blk.%s.%s.%s" % (layer, names[rest], suffix), w))
    for (layer, part), by_e in experts.items():
        out.append(("blk.%s.%s.weight" % (layer, part),
                    np.stack([by_e[e] for e in sorted(by_e)])))
    return out


# ----------------------------------------------------------- the models

rng = np.random.default_rng(7)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def make_model(c):
    """An HF state dict for config c (transformers' names and shapes)."""
    h, hd, n, kv = c["hidden"], c["head_dim"], c["heads"], c["kv_heads"]
    sd = {"model.embed_tokens.weight": rand(c["vocab"], h), "model.norm.weight": rand(h)}
    if not c.get("tied"):
        sd["lm_head.weight"] = rand(c["vocab"], h)
    for L in range(c["layers"]):
        p = "model.layers.%d." % L
        sd[p + "input_layernorm.weight"] = rand(h)
        sd[p + "post_attention_layernorm.weight"] = rand(h)
        if c.get("gemma"):
            sd[p + "pre_feedforward_layernorm.weight"] = rand(h)
            sd[p + "post_feedforward_layernorm.weight"] = rand(h)
        if c.get("fused"):
            sd[p + "self_attn.qkv_proj.weight"] = rand((n + 2 * kv) * hd, h)
        else:
            sd[p + "self_attn.q_proj.weight"] = rand(n * hd, h)
            sd[p + "self_attn.k_proj.weight"] = rand(kv * hd, h)
            sd[p + "self_attn.v_proj.weight"] = rand(kv * hd, h)
        sd[p + "self_attn.o_proj.weight"] = rand(h, n * hd)
        if c.get("qkv_bias"):
            sd[p + "self_attn.q_proj.bias"] = rand(n * hd)
            sd[p + "self_attn.k_proj.bias"] = rand(kv * hd)
            sd[p + "self_attn.v_proj.bias"] = rand(kv * hd)
        if c.get("qk_norm"):
            sd[p + "self_attn.q_norm.weight"] = rand(hd)
            sd[p + "self_attn.k_norm.weight"] = rand(hd)
        moe = c.get("moe")
        if moe == "gptoss":  # GptOssAttention's biases and sinks, GptOssMLP
            sd[p + "self_attn.o_proj.bias"] = rand(h)
            sd[p + "self_attn.sinks"] = rand(n)
            sd[p + "mlp.router.weight"] = rand(c["experts"], h)
            sd[p + "mlp.router.bias"] = rand(c["experts"])
            f = c["moe_ffn"]
            sd[p + "mlp.experts.gate_up_proj"] = rand(c["experts"], h, 2 * f)
            sd[p + "mlp.experts.gate_up_proj_bias"] = rand(c["experts"], 2 * f)
            sd[p + "mlp.experts.down_proj"] = rand(c["experts"], f, h)
            sd[p + "mlp.experts.down_proj_bias"] = rand(c["experts"], h)
        elif moe == "mixtral":
            sd[p + "block_sparse_moe.gate.weight"] = rand(c["experts"], h)
            for e in range(c["experts"]):
                q = p + "block_sparse_moe.experts.%d." % e
                sd[q + "w1.weight"] = rand(c["ffn"], h)
                sd[q + "w2.weight"] = rand(h, c["ffn"])
                sd[q + "w3.weight"] = rand(c["ffn"], h)
        elif moe == "qwen":
            f = c["moe_ffn"]
            sd[p + "mlp.gate.weight"] = rand(c["experts"], h)
            for e in range(c["experts"]):
                q = p + "mlp.experts.%d." % e
                sd[q + "gate_proj.weight"] = rand(f, h)
                sd[q + "up_proj.weight"] = rand(f, h)
                sd[q + "down_proj.weight"] = rand(h, f)
            if c.get("shared_ffn"):
                s = c["shared_ffn"]
                sd[p + "mlp.shared_expert.gate_proj.weight"] = rand(s, h)
                sd[p + "mlp.shared_expert.up_proj.weight"] = rand(s, h)
                sd[p + "mlp.shared_expert.down_proj.weight"] = rand(h, s)
                sd[p + "mlp.shared_expert_gate.weight"] = rand(1, h)
        elif c.get("fused"):
            sd[p + "mlp.gate_up_proj.weight"] = rand(2 * c["ffn"], h)
            sd[p + "mlp.down_proj.weight"] = rand(h, c["ffn"])
        else:
            sd[p + "mlp.gate_proj.weight"] = rand(c["ffn"], h)
            sd[p + "mlp.up_proj.weight"] = rand(c["ffn"], h)
            sd[p + "mlp.down_proj.weight"] = rand(h, c["ffn"])
    return sd


def metadata(c):
    """The <arch>.* keys llama.cpp's converter writes (gguf_writer.add_*)."""
    a = c["arch"]
    kvs = [kv_str("general.architecture", a), kv_u32(a + ".block_count", c["layers"]),
           kv_u32(a + ".context_length", c["ctx"]), kv_u32(a + ".embedding_length", c["hidden"]),
           kv_u32(a + ".feed_forward_length", c["ffn"]),
           kv_u32(a + ".attention.head_count", c["heads"]),
           kv_u32(a + ".attention.head_count_kv", c["kv_heads"]),
           kv_f32(a + ".attention.layer_norm_rms_epsilon", c["eps"]),
           kv_f32(a + ".rope.freq_base", c["theta"]), kv_u32(a + ".vocab_size", c["vocab"])]
    if c["head_dim"] != c["hidden"] // c["heads"]:
        kvs.append(kv_u32(a + ".attention.key_length", c["head_dim"]))
        kvs.append(kv_u32(a + ".attention.value_length", c["head_dim"]))
    if c.get("moe"):
        kvs.append(kv_u32(a + ".expert_count", c["experts"]))
        kvs.append(kv_u32(a + ".expert_used_count", c["used"]))
    if c.get("moe_ffn"):
        kvs.append(kv_u32(a + ".expert_feed_forward_length", c["moe_ffn"]))
    if c.get("shared_ffn"):
        kvs.append(kv_u32(a + ".expert_shared_feed_forward_length", c["shared_ffn"]))
    if c.get("moe") == "gptoss":  # GptOssModel.set_gguf_parameters (+ TextModel's yarn)
        kvs += [kv_u32(a + ".attention.sliding_window", 128),
                kv_str(a + ".rope.scaling.type", "yarn"), kv_f32(a + ".rope.scaling.factor", 32.0),
                kv_u32(a + ".rope.scaling.original_context_length", 4096)]
    if c.get("gemma") == "gemma2":  # Gemma2Model.set_gguf_parameters
        kvs = [k for k in kvs if b".rope.freq_base" not in k]  # not written for Gemma 2
        kvs += [kv_f32(a + ".attn_logit_softcapping", 50.0),
                kv_f32(a + ".final_logit_softcapping", 30.0),
                kv_u32(a + ".attention.sliding_window", 4096)]
    if c.get("gemma") == "gemma3":  # Gemma3Model.set_gguf_parameters (+ TextModel's rope scaling)
        kvs += [kv_u32(a + ".attention.sliding_window", 512),
                kv_str(a + ".rope.scaling.type", "linear"), kv_f32(a + ".rope.scaling.factor", 8.0)]
    return kvs


BASE = dict(layers=2, ctx=256, hidden=32, heads=4, kv_heads=2, head_dim=8, ffn=48, vocab=40,
            eps=1e-5, theta=10000.0, permute=False)
MODELS = [
    dict(BASE, arch="llama", cls="LlamaForCausalLM", model_type="llama", permute=True),
    dict(BASE, arch="llama", cls="LlamaForCausalLM", model_type="llama", permute=True,
         tied=True, kv_heads=4, name="llama-tied"),
    dict(BASE, arch="mistral", cls="MistralForCausalLM", model_type="mistral", permute=True),
    dict(BASE, arch="qwen2", cls="Qwen2ForCausalLM", model_type="qwen2", qkv_bias=True,
         theta=1000000.0, eps=1e-6),
    dict(BASE, arch="qwen3", cls="Qwen3ForCausalLM", model_type="qwen3", qk_norm=True,
         head_dim=16),
    dict(BASE, arch="phi3", cls="Phi3ForCausalLM", model_type="phi3", fused=True, kv_heads=4),
    dict(BASE, arch="llama", cls="MixtralForCausalLM", model_type="mixtral", permute=True,
         moe="mixtral", experts=4, used=2, name="mixtral"),
    dict(BASE, arch="qwen2moe", cls="Qwen2MoeForCausalLM", model_type="qwen2_moe",
         qkv_bias=True, moe="qwen", experts=4, used=2, moe_ffn=16, shared_ffn=24),
    dict(BASE, arch="qwen3moe", cls="Qwen3MoeForCausalLM", model_type="qwen3_moe",
         qk_norm=True, moe="qwen", experts=4, used=2, moe_ffn=16),
    dict(BASE, arch="gpt-oss", cls="GptOssForCausalLM", model_type="gpt_oss", qkv_bias=True,
         moe="gptoss", experts=4, used=2, moe_ffn=24, ffn=24, theta=150000.0, head_dim=16,
         layers=3),
    dict(BASE, arch="gpt-oss", cls="GptOssForCausalLM", model_type="gpt_oss", qkv_bias=True,
         moe="gptoss", experts=4, used=2, moe_ffn=24, ffn=24, theta=150000.0, head_dim=16,
         layers=3, fuse=True, name="gpt-oss-fused"),
    dict(BASE, arch="gemma2", cls="Gemma2ForCausalLM", model_type="gemma2", gemma="gemma2",
         tied=True, head_dim=16, eps=1e-6),
    # 46 layers: Gemma 2 27B's query scale (n_embd / n_head, not head_dim).
    dict(BASE, arch="gemma2", cls="Gemma2ForCausalLM", model_type="gemma2", gemma="gemma2",
         tied=True, head_dim=16, eps=1e-6, layers=46, name="gemma2-27b-shape"),
    dict(BASE, arch="gemma3", cls="Gemma3ForCausalLM", model_type="gemma3_text",
         gemma="gemma3", tied=True, qk_norm=True, head_dim=16, eps=1e-6, theta=1000000.0,
         layers=7),
]

# The config.json keys transformers reads, and the model's value of each.
CONFIG_KEYS = {"num_hidden_layers": "layers", "hidden_size": "hidden",
               "num_attention_heads": "heads", "num_key_value_heads": "kv_heads",
               "max_position_embeddings": "ctx", "vocab_size": "vocab"}


def run(gguf, out):
    return subprocess.run([cli, "dequant", gguf, out, "--hf", "--dtype", "f32"],
                          capture_output=True, text=True)


def read_folder(out):
    got = {}
    for f in sorted(glob.glob(os.path.join(out, "*.safetensors"))):
        got.update(read_st(f))
    return got


def check_folder(tag, hf, out):
    """The folder holds exactly state dict hf's tensors, each bit for bit (float32)."""
    got = read_folder(out)
    check(tag + ": the model's tensor names, no more, no fewer", set(got) == set(hf),
          "missing %s, extra %s" % (sorted(set(hf) - set(got))[:6], sorted(set(got) - set(hf))[:6]))
    for name, want in hf.items():
        g = got.get(name)
        check("%s: %s bit for bit" % (tag, name),
              g is not None and g.dtype == np.float32 and g.shape == want.shape
              and np.array_equal(g.view(np.uint32), want.view(np.uint32)),
              "shape %s vs %s" % (None if g is None else g.shape, want.shape))


for c in MODELS:
    tag = c.get("name", c["arch"])
    hf = make_model(c)
    tensors = to_gguf(hf, c)
    if tag == "llama":  # a float16 embedding (widened exactly)
        hf["model.embed_tokens.weight"] = hf["model.embed_tokens.weight"].astype(np.float16)
        tensors = [(n, hf["model.embed_tokens.weight"] if n == "token_embd.weight" else w)
                   for n, w in tensors]
        hf["model.embed_tokens.weight"] = hf["model.embed_tokens.weight"].astype(np.float32)
    gguf = os.path.join(work, tag + ".gguf")
    write_gguf(gguf, metadata(c), tensors)
    out = os.path.join(work, tag + "-hf")
    r = run(gguf, out)
    check(tag + ": exit 0", r.returncode == 0, r.stderr.strip()[-400:])
    if r.returncode != 0:
        continue
    if c.get("gemma"):  # transformers' GGUF loader: SubtractOne in float32
        stored = dict(tensors)
        for name in hf:
            if name.endswith("norm.weight"):
                g = "output_norm.weight" if name == "model.norm.weight" else None
                if g is None:
                    L, rest = name.split(".")[2], ".".join(name.split(".")[3:-1])
                    g = "blk.%s.%s.weight" % (L, GEMMA_NAMES[rest])
                hf[name] = stored[g] - np.float32(1)
    check_folder(tag, hf, out)
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    check(tag + ": architectures", cfg.get("architectures") == [c["cls"]], str(cfg.get("architectures")))
    check(tag + ": model_type", cfg.get("model_type") == c["model_type"], str(cfg.get("model_type")))
    for key, field in CONFIG_KEYS.items():
        check("%s: config %s" % (tag, key), cfg.get(key) == c[field],
              "%s vs %s" % (cfg.get(key), c[field]))
    check(tag + ": intermediate_size", cfg.get("intermediate_size") == c["ffn"])
    check(tag + ": rms_norm_eps", np.float32(cfg.get("rms_norm_eps", 0)) == np.float32(c["eps"]))
    if not c.get("gemma"):
        check(tag + ": rope_theta", cfg.get("rope_theta") == c["theta"])
    check(tag + ": tie_word_embeddings", cfg.get("tie_word_embeddings") == bool(c.get("tied")))
    if c["head_dim"] != c["hidden"] // c["heads"] or c.get("gemma"):
        check(tag + ": head_dim", cfg.get("head_dim") == c["head_dim"], str(cfg.get("head_dim")))
    if c.get("gemma"):
        g2 = c["gemma"] == "gemma2"
        check(tag + ": GELU (tanh)", cfg.get("hidden_activation") == "gelu_pytorch_tanh"
              and cfg.get("hidden_act") == "gelu_pytorch_tanh")
        big = c["layers"] == (46 if g2 else 62)
        want = c["hidden"] // c["heads"] if big else c["head_dim"]
        check(tag + ": query_pre_attn_scalar (llama.cpp's attention scale)",
              cfg.get("query_pre_attn_scalar") == want, str(cfg.get("query_pre_attn_scalar")))
        period = 2 if g2 else 6
        types = ["sliding_attention" if i % period < period - 1 else "full_attention"
                 for i in range(c["layers"])]
        check(tag + ": layer_types", cfg.get("layer_types") == types, str(cfg.get("layer_types"))[:80])
        check(tag + ": sliding_window", cfg.get("sliding_window") == (4096 if g2 else 512))
        check(tag + ": attn_logit_softcapping", cfg.get("attn_logit_softcapping") == (50.0 if g2 else None))
        check(tag + ": final_logit_softcapping", cfg.get("final_logit_softcapping") == (30.0 if g2 else None))
        check(tag + ": rope_theta", cfg.get("rope_theta") == (10000.0 if g2 else 1000000.0))
        if not g2:
            check(tag + ": rope_local_base_freq", cfg.get("rope_local_base_freq") == 10000.0)
            check(tag + ": rope_scaling", cfg.get("rope_scaling") == {"rope_type": "linear", "factor": 8.0},
                  str(cfg.get("rope_scaling")))
    if c.get("moe") == "gptoss":
        check(tag + ": experts_per_token", cfg.get("experts_per_token") == c["used"])
        check(tag + ": attention_bias", cfg.get("attention_bias") is True)
        check(tag + ": sliding_window", cfg.get("sliding_window") == 128)
        check(tag + ": layer_types", cfg.get("layer_types") ==
              ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(c["layers"])])
        check(tag + ": swiglu_limit", cfg.get("swiglu_limit") == 7.0)
        check(tag + ": rope_scaling", cfg.get("rope_scaling") == {
            "rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
            "original_max_position_embeddings": 4096}, str(cfg.get("rope_scaling")))
    if c.get("moe"):
        n_key = "num_experts" if c["moe"] == "qwen" else "num_local_experts"
        check(tag + ": " + n_key, cfg.get(n_key) == c["experts"], str(cfg.get(n_key)))
        check(tag + ": num_experts_per_tok", cfg.get("num_experts_per_tok") == c["used"])
    if c.get("moe_ffn") and c["moe"] == "qwen":
        check(tag + ": moe_intermediate_size", cfg.get("moe_intermediate_size") == c["moe_ffn"])
    if c.get("shared_ffn"):
        check(tag + ": shared_expert_intermediate_size",
              cfg.get("shared_expert_intermediate_size") == c["shared_ffn"])

    # One layer tensor left out: refused by name, nothing written.
    drop = "blk.1.ffn_down_exps.weight" if c.get("moe") else "blk.1.attn_output.weight"
    if c.get("moe") == "gptoss":
        drop = "blk.1.attn_sinks.weight"
    bad = os.path.join(work, tag + "-incomplete.gguf")
    write_gguf(bad, metadata(c), [(n, w) for n, w in tensors if n != drop])
    bad_out = os.path.join(work, tag + "-incomplete-hf")
    r = run(bad, bad_out)
    check(tag + ": an incomplete model is refused", r.returncode != 0 and "model.layers.1." in r.stderr,
          "rc %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
    check(tag + ": nothing written for it", not os.path.exists(bad_out))

# Settings transformers' Gemma configs cannot hold: refused by name.
for tag, extra, key in [("gemma2", [kv_f32("gemma2.rope.freq_base", 10000.0),
                                    kv_f32("gemma2.rope.freq_base_swa", 20000.0)],
                         "gemma2.rope.freq_base_swa"),
                        ("gemma3", [kv_str("gemma3.rope.scaling.type", "yarn")],
                         "gemma3.rope.scaling.type")]:
    c = next(m for m in MODELS if m.get("name", m["arch"]) == tag)
    kvs = [k for k in metadata(c) if b".rope.scaling.type" not in k] + extra
    bad = os.path.join(work, tag + "-unmapped.gguf")
    write_gguf(bad, kvs, [(n, w) for n, w in to_gguf(make_model(c), c)])
    r = run(bad, os.path.join(work, tag + "-unmapped-hf"))
    check(tag + ": %s refused by name" % key, r.returncode != 0 and key in r.stderr,
          "rc %d: %s" % (r.returncode, r.stderr.strip()[-200:]))
    check(tag + ": nothing written for it", not os.path.exists(os.path.join(work, tag + "-unmapped-hf")))

# gpt-oss: a gate without its up (or the reverse) is refused by name.
c = next(m for m in MODELS if m.get("name", m["arch"]) == "gpt-oss")
full = to_gguf(make_model(c), c)
for gone, named in [("blk.0.ffn_up_exps.weight", "blk.0.ffn_up_exps.weight"),
                    ("blk.1.ffn_gate_exps.bias", "blk.1.ffn_up_exps.bias")]:
    bad = os.path.join(work, "gpt-oss-unpaired.gguf")
    write_gguf(bad, metadata(c), [(n, w) for n, w in full if n != gone])
    out = os.path.join(work, "gpt-oss-unpaired-hf")
    r = run(bad, out)
    check("gpt-oss without %s: refused by name" % gone,
          r.returncode != 0 and named in r.stderr and "interleaves" in r.stderr,
          "rc %d: %s" % (r.returncode, r.stderr.strip()[-200:]))
    check("gpt-oss without %s: nothing written" % gone, not os.path.exists(out))

# ------------------------------------------------ DeepSeek-V2 / V3 (MLA)
# convert_hf_to_gguf.py DeepseekV2Model: gguf-py's DEEPSEEK2 names, the
# experts stacked, and (its MLA form, llama.cpp since 2025) kv_b_proj split
# per head into attn_k_b [H, rank, nope] (transposed) and attn_v_b
# [H, v, rank], head_count_kv 1, key_length rank + rope, the head sizes in
# key_length_mla / value_length_mla. `old`: the earlier converter (attn_kv_b
# kept, head_count_kv H, key_length nope + rope).
DS_NAMES = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.q_a_proj": "attn_q_a",
    "self_attn.q_a_layernorm": "attn_q_a_norm", "self_attn.q_b_proj": "attn_q_b",
    "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa", "self_attn.kv_a_layernorm": "attn_kv_a_norm",
    "self_attn.kv_b_proj": "attn_kv_b", "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
    "mlp.gate": "ffn_gate_inp", "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared_experts.up_proj": "ffn_up_shexp", "mlp.shared_experts.down_proj": "ffn_down_shexp",
}


def ds_model(c):
    h, H, r, rope, nope, v = c["hidden"], c["heads"], c["rank"], c["rope"], c["nope"], c["v"]
    sd = {"model.embed_tokens.weight": rand(c["vocab"], h), "model.norm.weight": rand(h),
          "lm_head.weight": rand(c["vocab"], h)}
    for L in range(c["layers"]):
        p = "model.layers.%d." % L
        sd[p + "input_layernorm.weight"] = rand(h)
        sd[p + "post_attention_layernorm.weight"] = rand(h)
        if c["q_rank"]:
            sd[p + "self_attn.q_a_proj.weight"] = rand(c["q_rank"], h)
            sd[p + "self_attn.q_a_layernorm.weight"] = rand(c["q_rank"])
            sd[p + "self_attn.q_b_proj.weight"] = rand(H * (nope + rope), c["q_rank"])
        else:
            sd[p + "self_attn.q_proj.weight"] = rand(H * (nope + rope), h)
        sd[p + "self_attn.kv_a_proj_with_mqa.weight"] = rand(r + rope, h)
        sd[p + "self_attn.kv_a_layernorm.weight"] = rand(r)
        sd[p + "self_attn.kv_b_proj.weight"] = rand(H * (nope + v), r)
        sd[p + "self_attn.o_proj.weight"] = rand(h, H * v)
        if L < c["dense"]:
            sd[p + "mlp.gate_proj.weight"] = rand(c["ffn"], h)
            sd[p + "mlp.up_proj.weight"] = rand(c["ffn"], h)
            sd[p + "mlp.down_proj.weight"] = rand(h, c["ffn"])
            continue
        f, E = c["moe_ffn"], c["experts"]
        sd[p + "mlp.gate.weight"] = rand(E, h)
        if c["v3"]:
            sd[p + "mlp.gate.e_score_correction_bias"] = rand(E)
        for e in range(E):
            q = p + "mlp.experts.%d." % e
            sd[q + "gate_proj.weight"] = rand(f, h)
            sd[q + "up_proj.weight"] = rand(f, h)
            sd[q + "down_proj.weight"] = rand(h, f)
        s = f * c["shared"]
        sd[p + "mlp.shared_experts.gate_proj.weight"] = rand(s, h)
        sd[p + "mlp.shared_experts.up_proj.weight"] = rand(s, h)
        sd[p + "mlp.shared_experts.down_proj.weight"] = rand(h, s)
    return sd


def ds_to_gguf(hf, c):
    out, experts = [], {}
    for name, w in hf.items():
        if name in TOP_NAMES:
            out.append((TOP_NAMES[name], w))
            continue
        parts = name.split(".")
        L, rest, suffix = parts[2], ".".join(parts[3:-1]), parts[-1]
        if ".experts." in name:
            experts.setdefault((L, EXPERTS[parts[-2]]), {})[int(parts[-3])] = w
        elif name.endswith("e_score_correction_bias"):
            out.append(("blk.%s.exp_probs_b.bias" % L, w))
        elif rest == "self_attn.kv_b_proj" and not c["old"]:
            kv_b = w.reshape(c["heads"], c["nope"] + c["v"], w.shape[-1])
            k_b, v_b = kv_b[:, :c["nope"], :], kv_b[:, c["nope"]:, :]
            out.append(("blk.%s.attn_k_b.weight" % L, np.ascontiguousarray(k_b.transpose(0, 2, 1))))
            out.append(("blk.%s.attn_v_b.weight" % L, np.ascontiguousarray(v_b)))
        else:
            out.append(("blk.%s.%s.%s" % (L, DS_NAMES[rest], suffix), w))
    for (L, part), by_e in experts.items():
        out.append(("blk.%s.%s.weight" % (L, part), np.stack([by_e[e] for e in sorted(by_e)])))
    return out


def ds_metadata(c):
    a = "deepseek2"
    kvs = [kv_str("general.architecture", a), kv_u32(a + ".block_count", c["layers"]),
           kv_u32(a + ".context_length", 512), kv_u32(a + ".embedding_length", c["hidden"]),
           kv_u32(a + ".feed_forward_length", c["ffn"]),
           kv_u32(a + ".attention.head_count", c["heads"]),
           kv_f32(a + ".attention.layer_norm_rms_epsilon", 1e-6),
           kv_f32(a + ".rope.freq_base", 10000.0), kv_u32(a + ".vocab_size", c["vocab"]),
           kv_u32(a + ".leading_dense_block_count", c["dense"]),
           kv_u32(a + ".attention.kv_lora_rank", c["rank"]),
           kv_u32(a + ".expert_feed_forward_length", c["moe_ffn"]),
           kv_u32(a + ".expert_count", c["experts"]), kv_u32(a + ".expert_used_count", 2),
           kv_u32(a + ".expert_shared_count", c["shared"]),
           kv_f32(a + ".expert_weights_scale", c["scale"]),
           kv_u32(a + ".rope.dimension_count", c["rope"])]
    if c["q_rank"]:
        kvs.append(kv_u32(a + ".attention.q_lora_rank", c["q_rank"]))
    if c["old"]:
        kvs += [kv_u32(a + ".attention.head_count_kv", c["heads"]),
                kv_u32(a + ".attention.key_length", c["nope"] + c["rope"]),
                kv_u32(a + ".attention.value_length", c["v"])]
    else:
        kvs += [kv_u32(a + ".attention.head_count_kv", 1),
                kv_u32(a + ".attention.key_length", c["rank"] + c["rope"]),
                kv_u32(a + ".attention.value_length", c["rank"]),
                kv_u32(a + ".attention.key_length_mla", c["nope"] + c["rope"]),
                kv_u32(a + ".attention.value_length_mla", c["v"])]
    if c["v3"]:
        kvs += [kv_bool(a + ".expert_weights_norm", True), kv_u32(a + ".expert_gating_func", 2),
                kv_str(a + ".rope.scaling.type", "yarn"), kv_f32(a + ".rope.scaling.factor", 40.0),
                kv_u32(a + ".rope.scaling.original_context_length", 4096),
                kv_f32(a + ".rope.scaling.yarn_log_multiplier", 0.1)]
    else:
        kvs.append(kv_u32(a + ".expert_gating_func", 1))
    return kvs


DS_BASE = dict(layers=3, hidden=32, heads=4, rank=12, rope=4, nope=8, v=6, q_rank=16, dense=1,
               ffn=48, moe_ffn=16, experts=4, shared=2, vocab=40, scale=2.5, v3=False, old=False)
DS_MODELS = [
    dict(DS_BASE, name="deepseek2-v3", v3=True),
    dict(DS_BASE, name="deepseek2-v2-lite-old", q_rank=0, shared=1, scale=1.0, old=True),
]
for c in DS_MODELS:
    tag = c["name"]
    hf = ds_model(c)
    tensors = ds_to_gguf(hf, c)
    gguf = os.path.join(work, tag + ".gguf")
    write_gguf(gguf, ds_metadata(c), tensors)
    out = os.path.join(work, tag + "-hf")
    r = run(gguf, out)
    check(tag + ": exit 0", r.returncode == 0, r.stderr.strip()[-400:])
    if r.returncode != 0:
        continue
    check_folder(tag, hf, out)
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    v3 = c["v3"]
    want = {"architectures": ["DeepseekV3ForCausalLM" if v3 else "DeepseekV2ForCausalLM"],
            "model_type": "deepseek_v3" if v3 else "deepseek_v2",
            "hidden_size": c["hidden"], "intermediate_size": c["ffn"],
            "moe_intermediate_size": c["moe_ffn"], "num_hidden_layers": c["layers"],
            "num_attention_heads": c["heads"], "num_key_value_heads": c["heads"],
            "n_routed_experts": c["experts"], "n_shared_experts": c["shared"],
            "num_experts_per_tok": 2, "first_k_dense_replace": c["dense"],
            "routed_scaling_factor": c["scale"], "norm_topk_prob": v3,
            "kv_lora_rank": c["rank"], "q_lora_rank": c["q_rank"] or None,
            "qk_rope_head_dim": c["rope"], "qk_nope_head_dim": c["nope"], "v_head_dim": c["v"],
            "topk_method": "noaux_tc" if v3 else "greedy", "vocab_size": c["vocab"],
            "max_position_embeddings": 512, "tie_word_embeddings": False}
    if v3:
        want["rope_scaling"] = {"type": "yarn", "factor": 40.0,
                                "original_max_position_embeddings": 4096, "beta_fast": 32,
                                "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}
    else:
        want["scoring_func"] = "softmax"
    for key, value in want.items():
        check("%s: config %s" % (tag, key), cfg.get(key) == value,
              "%r vs %r" % (cfg.get(key), value))
    check(tag + ": no head_dim (MLA's sizes are the qk_*/v_head_dim keys)", "head_dim" not in cfg)

    # A layer tensor left out, or half of kv_b: refused by name, nothing written.
    for drop, named in [("blk.2.ffn_down_exps.weight", "model.layers.2."),
                        ("blk.1.attn_kv_a_norm.weight", "model.layers.1."),
                        ("blk.0.attn_v_b.weight", "blk.0.attn_k_b.weight"),
                        ("blk.2.exp_probs_b.bias", "model.layers.2.mlp.gate.e_score")]:
        if not any(n == drop for n, _ in tensors):
            continue
        bad = os.path.join(work, tag + "-incomplete.gguf")
        write_gguf(bad, ds_metadata(c), [(n, w) for n, w in tensors if n != drop])
        bad_out = os.path.join(work, tag + "-incomplete-hf")
        r = run(bad, bad_out)
        check("%s without %s: refused by name" % (tag, drop),
              r.returncode != 0 and named in r.stderr,
              "rc %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
        check("%s without %s: nothing written" % (tag, drop), not os.path.exists(bad_out))

# Gemma's norms in bfloat16: stored - 1 in float32, then one rounding.
g = os.path.join(work, "gemma3.gguf")
out = os.path.join(work, "gemma3-bf16")
r = subprocess.run([cli, "dequant", g, out, "--hf", "--dtype", "bf16"], capture_output=True,
                   text=True)
check("gemma3 bf16: exit 0", r.returncode == 0, r.stderr.strip()[-300:])
if r.returncode == 0:
    got = read_folder(out)
    stored = read_gguf_f32(g)
    want = bf16_value(bf16_bits(stored["blk.3.post_ffw_norm.weight"] - np.float32(1)))
    check("gemma3 bf16: post_feedforward_layernorm = bf16(stored - 1)",
          np.array_equal(got["model.layers.3.post_feedforward_layernorm.weight"], want))

print("hf mapping: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
