"""nibble.distributed on a Dask LocalCluster (2 worker processes).

Multi-shard checkpoints of each family — GPTQ, compressed-tensors, FP8
(DeepSeek blocks), GGUF -> --hf — are converted shard-parallel and must equal
`nibble dequant` in one process byte for byte (every file of the folder).
A worker SIGKILLed in the middle of a shard is survived (the scheduler
reruns the shard; the output is still identical); a shard whose workers die
on every try fails the run cleanly — an error naming the shard, nothing at
the destination, no temporaries, complete shards kept — and the next run
resumes them; a damaged kept shard (same size, other bytes) is rewritten; a
staging folder of a different job (the input changed) is refused; without
a client the same steps run in this process; without Dask installed,
`import nibble` works and a scheduler address says what to install.
Usage: test_distributed.py NIBBLE_CLI WORK_DIR
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

try:
    import numpy as np
    import nibble.distributed as nd
except ImportError as e:
    print("SKIP: %s (numpy and the nibble module are needed)" % e)
    sys.exit(77)
if not nd.available():
    print("SKIP: Dask's distributed is not importable by %s (apt-get install "
          "python3-distributed)" % sys.executable)
    sys.exit(77)

import dask  # noqa: E402
import distributed  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_util import kv_f32, kv_str, kv_u32, write_gguf  # noqa: E402
from packing_util import pack_cols, pack_rows  # noqa: E402
from safetensors_util import bf16_bits, write_st  # noqa: E402

cli = work = None  # set by main(): worker processes import this file too
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name + (": " + str(detail) if detail else ""))


rng = np.random.default_rng(52)
HID, FF, LAYERS, VOCAB = 256, 512, 2, 384
PROJ = {"self_attn.q_proj": (HID, HID), "self_attn.k_proj": (HID // 2, HID),
        "self_attn.v_proj": (HID // 2, HID), "self_attn.o_proj": (HID, HID),
        "mlp.gate_proj": (FF, HID), "mlp.up_proj": (FF, HID), "mlp.down_proj": (HID, FF)}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HID,
         "intermediate_size": FF, "num_hidden_layers": LAYERS, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
         "torch_dtype": "bfloat16"}


def hf_folder(name, quantized, qc):
    """A llama folder in two input shards + index: `quantized(prefix, n, k)`
    gives each projection's tensors; norms and embeddings are bf16."""
    d = os.path.join(work, name)
    os.makedirs(d)
    t = {"model.embed_tokens.weight": ("BF16", bf16_bits(rng.standard_normal((VOCAB, HID)))),
         "model.norm.weight": ("BF16", bf16_bits(rng.standard_normal(HID)))}
    for layer in range(LAYERS):
        for proj, (n, k) in PROJ.items():
            t.update(quantized("model.layers.%d.%s" % (layer, proj), n, k))
        for norm in ("input_layernorm", "post_attention_layernorm"):
            t["model.layers.%d.%s.weight" % (layer, norm)] = ("BF16", bf16_bits(
                rng.standard_normal(HID)))
    names = list(t)
    half = len(names) // 2
    index = {}
    for i, part in enumerate((names[:half], names[half:])):
        f = "model-%05d-of-00002.safetensors" % (i + 1)
        write_st(os.path.join(d, f), {n: t[n] for n in part})
        index.update({n: f for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": index}, f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(LLAMA, quantization_config=qc), f)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        f.write('{"model_max_length": 4096}\n')
    return d


def gptq(p, n, k, G=128):
    q = rng.integers(0, 16, (k, n))
    return {p + ".qweight": ("I32", pack_rows(q, 4)),
            p + ".qzeros": ("I32", pack_cols(rng.integers(0, 16, (k // G, n)), 4)),
            p + ".scales": ("F16", (0.01 + 0.02 * rng.random((k // G, n))).astype(np.float16)),
            p + ".g_idx": ("I32", rng.permutation(np.arange(k) // G).astype(np.int32))}


def ct(p, n, k, G=64):
    return {p + ".weight_packed": ("I32", pack_cols(rng.integers(0, 16, (n, k)), 4)),
            p + ".weight_scale": ("BF16", bf16_bits(0.01 + 0.02 * rng.random((n, k // G)))),
            p + ".weight_shape": ("I64", np.array([n, k], np.int64))}


def fp8(p, n, k):
    return {p + ".weight": ("F8_E4M3", rng.integers(0, 0x7E, (n, k), dtype=np.uint8)),
            p + ".weight_scale_inv": ("F32", rng.random((-(-n // 128), -(-k // 128)))
                                      .astype(np.float32))}


def q8_0(rows, cols):
    """(ggml type 8, ne, blocks) of a [rows, cols] Q8_0 weight."""
    nb = rows * cols // 32
    d = (0.001 + 0.01 * rng.random(nb)).astype("<f2").view(np.uint8).reshape(nb, 2)
    qs = rng.integers(-127, 128, (nb, 32), dtype=np.int8).view(np.uint8)
    return (8, [cols, rows], np.concatenate([d, qs], axis=1).tobytes())


def gguf_model():
    path = os.path.join(work, "llama.gguf")
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    ts = [("token_embd.weight", q8_0(VOCAB, HID)),
          ("output_norm.weight", rng.standard_normal(HID).astype(np.float32))]
    for layer in range(LAYERS):
        for proj, (n, k) in PROJ.items():
            ts.append(("blk.%d.%s.weight" % (layer, names[proj]), q8_0(n, k)))
        for norm in ("attn_norm", "ffn_norm"):
            ts.append(("blk.%d.%s.weight" % (layer, norm),
                       rng.standard_normal(HID).astype(np.float32)))
    a = "llama"
    kvs = [kv_str("general.architecture", a), kv_u32(a + ".block_count", LAYERS),
           kv_u32(a + ".context_length", 4096), kv_u32(a + ".embedding_length", HID),
           kv_u32(a + ".feed_forward_length", FF), kv_u32(a + ".attention.head_count", 4),
           kv_u32(a + ".attention.head_count_kv", 2),
           kv_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5),
           kv_f32(a + ".rope.freq_base", 10000.0), kv_u32(a + ".vocab_size", VOCAB)]
    write_gguf(path, kvs, ts)
    return path


SHARD = 300_000  # bytes: several output shards per model


def cli_convert(src, out, opts):
    args = [cli, "dequant", src, out, "--max-shard-size", str(SHARD)]
    if opts.get("hf"):
        args.append("--hf")
    if opts.get("dtype"):
        args += ["--dtype", opts["dtype"]]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
    return r.returncode


def xxh64(path):
    """XXH64 (seed 0) of a file, written here from the algorithm's
    description: the oracle of the checksum nibble computes while writing."""
    M = (1 << 64) - 1
    P1, P2, P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
    P4, P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5

    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & M

    def rnd(acc, v):
        return rotl((acc + v * P2) & M, 31) * P1 & M

    with open(path, "rb") as f:
        data = f.read()
    n, i = len(data), 0
    if n >= 32:
        v = [(P1 + P2) & M, P2, 0, (-P1) & M]
        words = np.frombuffer(data[:n - n % 32], "<u8").reshape(-1, 4)
        for row in words.tolist():
            v = [rnd(v[j], row[j]) for j in range(4)]
        i = n - n % 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for x in v:
            h = ((h ^ rnd(0, x)) * P1 + P4) & M
    else:
        h = P5
    h = (h + n) & M
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, int.from_bytes(data[i:i + 8], "little")), 27) * P1 + P4) & M
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (int.from_bytes(data[i:i + 4], "little") * P1 & M), 23) * P2 + P3) & M
        i += 4
    while i < n:
        h = rotl(h ^ (data[i] * P5 & M), 11) * P1 & M
        i += 1
    h ^= h >> 33
    h = h * P2 & M
    h ^= h >> 29
    h = h * P3 & M
    h ^= h >> 32
    return "%016x" % h


def files(d):
    out = {}
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), "rb") as f:
            out[n] = f.read()
    return out


def same_folder(label, got, want):
    a, b = files(got), files(want)
    check(label + ": the same files", sorted(a) == sorted(b), (sorted(a), sorted(b)))
    for n in b:
        check(label + ": " + n + " byte for byte", a.get(n) == b[n])


def clean_siblings(label, dst):
    """Nothing but dst itself (no staging folder, no temporaries) beside it."""
    base = os.path.basename(dst.rstrip("/"))
    left = [n for n in os.listdir(os.path.dirname(dst)) if n.startswith(base) and n != base]
    check(label + ": nothing left beside the output", not left, left)


# --- a LocalCluster of 2 worker processes -----------------------------------
MARKER = None  # set by main()


def kill_once(shard, done, total):
    """SIGKILLs its worker after the first tensor of the second shard, once."""
    if shard.startswith("model-00002-") and done >= 1 and not os.path.exists(MARKER):
        open(MARKER, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)


def kill_always(shard, done, total):
    if shard.startswith("model-00004-") and done >= 1:
        os.kill(os.getpid(), signal.SIGKILL)


# A worker_progress hook that fails the third shard: the first two are kept.
def fail_third(shard, done, total):
    if shard.startswith("model-00003-"):
        raise RuntimeError("stopped by the test")



def main():
    global cli, work, MARKER
    cli, work = sys.argv[1], os.path.abspath(sys.argv[2])
    MARKER = os.path.join(work, "killed-once")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    CASES = {
        "gptq": (hf_folder("gptq", gptq, {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                          "desc_act": True, "sym": False}), {}),
        "ct": (hf_folder("ct", ct, {
            "quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                "group_size": 64}}}}), {}),
        "fp8": (hf_folder("fp8", fp8, {"quant_method": "fp8", "weight_block_size": [128, 128]}),
                {"dtype": "bf16"}),
        "gguf-hf": (gguf_model(), {"hf": True, "dtype": "bf16"}),
    }
    refs = {}
    for name, (src, opts) in CASES.items():
        ref = os.path.join(work, name + "-ref")
        check(name + ": nibble dequant in one process", cli_convert(src, ref, opts) == 0)
        refs[name] = ref
        check(name + ": several output shards", len([n for n in os.listdir(ref)
                                                      if n.endswith(".safetensors")]) >= 3)

    # --- in this process (no client) ---------------------------------------------
    for name, (src, opts) in CASES.items():
        dst = os.path.join(work, name + "-local")
        rep = nd.convert(src, dst, None, max_shard_bytes=SHARD, **opts)
        same_folder(name + " (no client)", dst, refs[name])
        check(name + " (no client): every shard written", rep["written"] == rep["shards"]
              and rep["reused"] == 0, rep)
        clean_siblings(name + " (no client)", dst)


    # A ".safetensors" destination is one file, one task: == nibble dequant's.
    src, opts = CASES["ct"]
    one = os.path.join(work, "ct-one.safetensors")
    ref_one = os.path.join(work, "ct-one-ref.safetensors")
    r = subprocess.run([cli, "dequant", src, ref_one], capture_output=True, text=True)
    rep = nd.convert(src, one, None, **opts)
    check("one .safetensors file, byte for byte", r.returncode == 0 and os.path.exists(one)
          and open(one, "rb").read() == open(ref_one, "rb").read(), rep)

    # The steps themselves (nibble._nibble._dequant_step): a worker whose
    # plan differs writes nothing; bad steps are refused by name.
    from nibble import _nibble, _dequant_args
    src, opts = CASES["ct"]
    args = _dequant_args(max_shard_bytes=SHARD, **opts)
    plan = _nibble._dequant_step(src, os.path.join(work, "steps"), args, "plan")
    check("plan: shard names, sizes, tensors",
          [s[0] for s in plan["shards"]][:1] == ["model-00001-of-%05d.safetensors"
                                                  % len(plan["shards"])]
          and sum(s[1] for s in plan["shards"]) > 0 and len(plan["key"]) == 16, plan)
    st = os.path.join(work, "steps-staging")
    os.makedirs(st)
    for label, kind, shard, key, needle in [
            ("another plan's key", "shard", 0, "0" * 16, "differs from the one it started with"),
            ("a shard past the plan", "shard", len(plan["shards"]), plan["key"], "does not exist"),
            ("an unknown step", "write", 0, plan["key"], "plan, shard or index")]:
        try:
            _nibble._dequant_step(src, os.path.join(work, "steps"), args, kind, st, shard, key)
            check("step refused: " + label, False)
        except ValueError as e:
            check("step refused: " + label, needle in str(e), e)
    check("refused steps wrote nothing", os.listdir(st) == [])
    try:
        _nibble._dequant_step(src, os.path.join(work, "steps"), args, "shard",
                              os.path.join(work, "no-such-dir"), 0, plan["key"])
        check("step refused: a missing staging folder", False)
    except ValueError as e:
        check("step refused: a missing staging folder", "is not a folder" in str(e), e)

    src, opts = CASES["fp8"]
    dst = os.path.join(work, "fp8-resume")
    try:
        nd.convert(src, dst, max_shard_bytes=SHARD, worker_progress=fail_third, **opts)
        check("a failing shard raises", False)
    except RuntimeError as e:
        check("the error names the shard and says how to resume",
              "model-00003-" in str(e) and "stopped by the test" in str(e)
              and "2 of" in str(e) and "resume" in str(e), e)
    check("a failed run publishes nothing", not os.path.exists(dst))
    staging = dst + nd.STAGING_SUFFIX
    kept = sorted(n for n in os.listdir(staging) if n.endswith(".nibble-done.json"))
    check("complete shards are kept with their records", len(kept) == 2, kept)
    check("no temporary of the failed shard",
          not [n for n in os.listdir(staging) if "nibble-tmp" in n or n.startswith("model-00003")])
    # Damage one kept shard without changing its size: the hash catches it.
    victim = os.path.join(staging, kept[1][:-len(".nibble-done.json")])
    with open(victim, "r+b") as f:
        f.seek(os.path.getsize(victim) - 1)
        last = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([last[0] ^ 0xFF]))
    rep = nd.convert(src, dst, max_shard_bytes=SHARD, **opts)
    check("a rerun reuses the verified shard and rewrites the damaged one",
          rep["reused"] == 1 and rep["written"] == rep["shards"] - 1, rep)
    same_folder("fp8 resumed", dst, refs["fp8"])
    clean_siblings("fp8 resumed", dst)

    # A staging folder of another job is refused, not adopted or deleted.
    try:
        nd.convert(src, dst + "-b", max_shard_bytes=SHARD, worker_progress=fail_third, **opts)
    except RuntimeError:
        pass
    os.utime(os.path.join(src, "model-00001-of-00002.safetensors"))  # the input changed
    try:
        nd.convert(src, dst + "-b", max_shard_bytes=SHARD, **opts)
        check("a changed input's staging folder is refused", False)
    except ValueError as e:
        check("a changed input's staging folder is refused",
              "different conversion" in str(e) and "delete it" in str(e), e)
    check("the refused staging folder is left alone", os.path.isdir(dst + "-b" + nd.STAGING_SUFFIX))
    shutil.rmtree(dst + "-b" + nd.STAGING_SUFFIX)
    try:
        nd.convert(src, dst, max_shard_bytes=SHARD, **opts)
        check("a non-empty output folder is refused", False)
    except Exception as e:  # noqa: BLE001 - the module's error type
        check("a non-empty output folder is refused, before any staging",
              "not empty" in str(e) and not os.path.exists(staging), e)
    try:
        nd.convert(src, os.path.join(work, "x"), verify="nope")
        check("a bad verify is refused", False)
    except ValueError:
        check("a bad verify is refused", True)

    dask.config.set({"distributed.scheduler.allowed-failures": 1})
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=50) as cluster, \
            distributed.Client(cluster) as client:
        for name, (src, opts) in CASES.items():
            dst = os.path.join(work, name + "-dask")
            seen = []
            rep = nd.convert(src, dst, client, max_shard_bytes=SHARD,
                             progress=lambda s, d, t: seen.append((s, d, t)), **opts)
            same_folder(name + " (Dask)", dst, refs[name])
            check(name + " (Dask): progress per shard", len(seen) == rep["shards"]
                  and seen[-1][1:] == (rep["shards"], rep["shards"]), seen)
            check(name + " (Dask): the report's records", len(rep["records"]) == rep["shards"]
                  and all(r["xxh64"] == xxh64(os.path.join(dst, n)) for n, r in rep["records"].items()),
                  rep)
            clean_siblings(name + " (Dask)", dst)

        # The command line, on the same scheduler, a size with a unit.
        src, opts = CASES["gguf-hf"]
        dst = os.path.join(work, "gguf-cli")
        r = subprocess.run([sys.executable, "-m", "nibble.distributed", src, dst, "--hf",
                            "--dtype", "bf16", "--max-shard-size", "300KB", "--scheduler",
                            cluster.scheduler_address], capture_output=True, text=True)
        check("python3 -m nibble.distributed --scheduler", r.returncode == 0
              and "written" in r.stdout, r.stdout + r.stderr)
        same_folder("gguf-hf (command line)", dst, refs["gguf-hf"])
        r = subprocess.run([sys.executable, "-m", "nibble.distributed", src, dst, "--hf"],
                           capture_output=True, text=True)
        check("the command line refuses a non-empty output, exit 1",
              r.returncode == 1 and "not empty" in r.stderr, r.stdout + r.stderr)

        src, opts = CASES["gptq"]
        dst = os.path.join(work, "gptq-killed")
        rep = nd.convert(src, dst, client, max_shard_bytes=SHARD, worker_progress=kill_once,
                         **opts)
        check("a worker was killed mid-shard", os.path.exists(MARKER))
        same_folder("gptq, a worker killed mid-shard", dst, refs["gptq"])
        clean_siblings("gptq, a worker killed mid-shard", dst)

        dst = os.path.join(work, "gptq-dies")
        try:
            nd.convert(src, dst, client, max_shard_bytes=SHARD, worker_progress=kill_always,
                       **opts)
            check("a shard whose workers always die fails the run", False)
        except RuntimeError as e:
            # Named: the shard Dask gave up on. Usually model-00004, but a
            # shard queued on the same worker dies with it each time and may
            # reach Dask's allowed-failures first (seen in ~2 of 35 runs);
            # either way model-00004 is not among the completed shards.
            check("a shard whose workers always die fails the run, naming it",
                  re.search(r"shard model-\d{5}-of-\d{5}\.safetensors: "
                            r"the workers running it died", str(e)) is not None, e)
        check("nothing published", not os.path.exists(dst))
        staging = dst + nd.STAGING_SUFFIX
        kept = [n for n in os.listdir(staging) if n.endswith(".nibble-done.json")]
        check("the dying shard was not completed", not [n for n in kept if "model-00004-" in n],
              kept)
        check("no temporaries of the killed writers",
              not [n for n in os.listdir(staging) if "nibble-tmp" in n])
        client.wait_for_workers(2, timeout=60)
        rep = nd.convert(src, dst, client, max_shard_bytes=SHARD, **opts)
        check("the rerun resumes the kept shards", rep["reused"] == len(kept), (rep, kept))
        same_folder("gptq, resumed on Dask", dst, refs["gptq"])
        clean_siblings("gptq, resumed on Dask", dst)

    # Without Dask: importing nibble works; a scheduler address says what
    # to install.
    code = ("import sys; sys.modules['distributed'] = None\n"
            "import nibble, nibble.distributed as nd\n"
            "assert not nd.available()\n"
            "try:\n"
            "    nd.convert('a', 'b', 'tcp://127.0.0.1:1')\n"
            "except ImportError as e:\n"
            "    print('ImportError:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    check("without Dask: import works and the install hint is given",
          r.returncode == 0 and "python3-distributed" in r.stdout, r.stdout + r.stderr)

    print("distributed: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
