import json, struct, numpy as np, os
rng = np.random.default_rng(1)
E, R, K = 32, 5760, 2880
G = K // 32
pre = "model.layers.0.mlp.experts."
blocks = rng.integers(0, 256, size=(E, R, G, 16), dtype=np.uint8)
scales = rng.integers(118, 127, size=(E, R, G), dtype=np.uint8)
tensors = {pre + "gate_up_proj_blocks": blocks, pre + "gate_up_proj_scales": scales}
header, off, datas = {}, 0, []
for name, a in tensors.items():
    b = a.tobytes()
    header[name] = {"dtype": "U8", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
    off += len(b); datas.append(b)
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
os.makedirs("src", exist_ok=True)
with open("src/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h)
    for b in datas: f.write(b)
cfg = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "torch_dtype": "bfloat16",
       "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}
json.dump(cfg, open("src/config.json", "w"))
