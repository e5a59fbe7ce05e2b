"""nibble.open / get_tensor / get_slice / dequant / inspect / fold on the
tests' generated checkpoints (GGUF with several block types, GPTQ and AWQ
folders, a file with an unsupported type), numpy always, torch when
importable. Usage: test_checkpoint_api.py CHECKPOINT_DIR WORK_DIR [FOLD_MODELS_DIR]
"""
import os
import shutil
import struct
import sys
import threading

import numpy as np

import nibble

ck_dir, work = sys.argv[1], sys.argv[2]
try:
    import torch
except ImportError:
    torch = None
passed = failed = 0


def check(name, cond):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name)


def raises(name, exc, fn, needle=""):
    try:
        fn()
    except exc as e:
        check(name + " (" + str(e) + ")", needle in str(e))
        return
    except Exception as e:  # noqa: BLE001
        check(name + ": raised %s %s instead" % (type(e).__name__, e), False)
        return
    check(name + ": did not raise", False)


def bf16_bits(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        import json
        header = json.loads(f.read(n))
        data = f.read()
    types = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[a:b], types[e["dtype"]]).reshape(e["shape"])
    return out


paths = [os.path.join(ck_dir, p) for p in ("model.gguf", "gptq", "awq", "llama_tiny.gguf")]
# metadata(): the files' own; properties(): what inspect shows; load_file.
with nibble.open(os.path.join(ck_dir, "llama_tiny.gguf")) as f:
    check("GGUF metadata() holds its keys, typed", f.metadata().get("general.architecture") ==
          "llama" and f.metadata().get("llama.block_count") == 1)
    whole = {n: f.get_tensor(n, dtype="f32") for n in f.keys()}
with nibble.open(os.path.join(ck_dir, "gptq")) as f:
    check("GPTQ properties() say the method: %s" % f.properties(),
          f.properties().get("quantization") == "GPTQ")
    check("GPTQ metadata() is the safetensors __metadata__: %s" % f.metadata(),
          "quantization" not in f.metadata())


# GGUF metadata values are typed as gguf-py reads them; long arrays are read
# from the file when first used.
def gguf_kv(key, vtype, payload):
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<I", vtype) + payload


def gguf_s(v):
    b = v.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(b)) + b


words = ["w%d" % i for i in range(20)] + ["caf\u00e9"]
kvs = [gguf_kv("s", 8, gguf_s("llama")), gguf_kv("u32", 4, struct.pack("<I", 7)),
       gguf_kv("i32", 5, struct.pack("<i", -3)), gguf_kv("f32", 6, struct.pack("<f", 0.5)),
       gguf_kv("b", 7, b"\x01"), gguf_kv("u64", 10, struct.pack("<Q", 2 ** 40)),
       gguf_kv("short", 9, struct.pack("<IQ", 8, 3) + b"".join(gguf_s(w) for w in "abc")),
       gguf_kv("words", 9, struct.pack("<IQ", 8, len(words)) + b"".join(gguf_s(w) for w in words)),
       gguf_kv("scores", 9, struct.pack("<IQ", 6, 20) + np.arange(20, dtype="<f4").tobytes()),
       gguf_kv("ids", 9, struct.pack("<IQ", 5, 20) + (-np.arange(20, dtype="<i4")).tobytes()),
       gguf_kv("flags", 9, struct.pack("<IQ", 7, 10) + bytes([1, 0] * 5)),
       gguf_kv("nested", 9, struct.pack("<IQ", 9, 10) +
               b"".join(struct.pack("<IQ", 4, 1) + struct.pack("<I", i) for i in range(10)))]
head = b"GGUF" + struct.pack("<IQQ", 3, 1, len(kvs)) + b"".join(kvs)
head += gguf_s("t") + struct.pack("<IQIQ", 1, 4, 0, 0)
head += b"\0" * (-len(head) % 32)
os.makedirs(work, exist_ok=True)  # (emptied again below, before the fold checks)
typed_path = os.path.join(work, "typed.gguf")
with open(typed_path, "wb") as fh:
    fh.write(head + np.ones(4, "<f4").tobytes())
with nibble.open(typed_path) as f:
    m = f.metadata()
    check("GGUF scalars typed: %r" % {k: m[k] for k in ("s", "u32", "i32", "f32", "b", "u64")},
          m["s"] == "llama" and m["u32"] == 7 and m["i32"] == -3 and m["f32"] == 0.5 and
          m["b"] is True and m["u64"] == 2 ** 40)
    check("GGUF short array: a list", m["short"] == ["a", "b", "c"])
    check("GGUF long array: lazy, len known", isinstance(m["words"], nibble.GgufArray) and
          len(m["words"]) == 21 and m["words"].elem_type == "string")
    check("GGUF long array: elements read", list(m["words"]) == words and m["words"][-1] ==
          "caf\u00e9")
    check("GGUF float / int / bool arrays", list(m["scores"]) == [float(i) for i in range(20)] and
          list(m["ids"]) == [-i for i in range(20)] and
          list(m["flags"]) == [True, False] * 5 and isinstance(m["ids"][1], int))
    check("GGUF nested array: shown as text", isinstance(m["nested"], str))
loaded = nibble.load_file(os.path.join(ck_dir, "llama_tiny.gguf"), dtype="f32")
check("load_file: every tensor, as get_tensor reads it",
      sorted(loaded) == sorted(whole) and all(np.array_equal(loaded[n], whole[n]) for n in whole))
fold_dir = sys.argv[3] if len(sys.argv) > 3 else ""
onnx_models = ["qdq_int4.onnx", "qdq_uint4_f16.onnx", "qdq_external.onnx", "opmx_int4.onnx",
               "mmnb_zp.onnx", "mmnb8.onnx", "mmnb_nozp_bias.onnx"]
if fold_dir:
    paths += [os.path.join(fold_dir, m) for m in onnx_models]
for path in paths:
    label = os.path.basename(path)
    with nibble.open(path) as f:
        check(label + ": keys", len(f.keys()) > 0 and list(f) == f.keys() and len(f) == len(f.keys()))
        # str -> str as safe_open's; GGUF values typed (checked above).
        check(label + ": metadata keys str, values str unless GGUF",
              all(isinstance(k, str) and (isinstance(v, str) or path.endswith(".gguf"))
                  for k, v in f.metadata().items()))
        # As safetensors' safe_open: keys sorted, dtypes in its spelling.
        check(label + ": keys sorted", f.keys() == sorted(f.keys()))
        for name in f.keys()[:3]:
            if f.info(name)["supported"] and f.info(name)["dtype"] in ("float32", "float16",
                                                                        "bfloat16"):
                check(label + ": get_dtype " + name,
                      f.get_slice(name).get_dtype() in ("F32", "F16", "BF16") and
                      f.get_slice(name, dtype="bfloat16").get_dtype() == "BF16")
        for name in f.keys():
            info = f.info(name)
            check(label + ": " + name + " in f", name in f and info["source"] in f)
            if not info["supported"]:
                continue
            w = f.get_tensor(name)
            check(label + ": default dtype " + name, str(w.dtype) in (info["dtype"], "uint16"))
            check(label + ": shape " + name, list(w.shape) == list(info["shape"]))
            if info["dtype"] not in ("float32", "float16", "bfloat16"):
                continue
            w32 = f.get_tensor(name, dtype="float32")
            b16 = f.get_tensor(name, dtype="bf16")
            h16 = f.get_tensor(name, dtype=np.float16)
            check(label + ": bf16 == RNE(f32) " + name,
                  b16.dtype == np.uint16 and np.array_equal(b16, bf16_bits(w32)))
            check(label + ": f16 == f32 -> f16 " + name,
                  h16.dtype == np.float16 and np.array_equal(h16, w32.astype(np.float16)))
            # Aliases give the same bits.
            for alias in ("f32", "fp32", "float", "FLOAT32"):
                check(label + ": alias " + alias, np.array_equal(f.get_tensor(name, alias), w32))
            # get_slice == numpy slicing of the whole tensor.
            s = f.get_slice(name, dtype="f32")
            rows = w32.shape[0]
            check(label + ": get_shape " + name, s.get_shape() == list(w32.shape))
            for idx in (slice(1, rows - 1), slice(None, None, 3), slice(-2, None),
                        slice(None, None, -2), slice(rows, rows + 5), slice(3, 1)):
                check(label + ": slice %s %s" % (idx, name), np.array_equal(s[idx], w32[idx]))
            check(label + ": row -1 " + name, np.array_equal(s[-1], w32[-1]))
            if w32.ndim > 1:
                check(label + ": 2-D index " + name, np.array_equal(s[1:5, 2:7], w32[1:5, 2:7]))
            raises(label + ": row out of range", IndexError, lambda: s[rows], "outside")
            # threads: every count gives the same bits.
            with nibble.open(path, threads=1) as f1:
                check(label + ": threads=1 " + name, np.array_equal(f1.get_tensor(name, "f32"), w32))
            if torch is not None:
                with nibble.open(path, framework="pt") as fp:
                    t = fp.get_tensor(name, dtype="bf16")
                    check(label + ": torch bf16 " + name, t.dtype == torch.bfloat16 and
                          np.array_equal(t.view(torch.int16).numpy().view(np.uint16), b16))
                    check(label + ": torch bf16 == torch's rounding " + name,
                          torch.equal(t, torch.from_numpy(w32).to(torch.bfloat16)))
                    t32 = fp.get_tensor(name, dtype=torch.float32)
                    check(label + ": torch f32 " + name, t32.dtype == torch.float32 and
                          np.array_equal(t32.numpy(), w32))
                    part = fp.get_slice(name, dtype="bf16")[1:3]
                    check(label + ": torch slice " + name, torch.equal(part, t[1:3]))

# Several Python threads reading one checkpoint at once (GIL released).
with nibble.open(os.path.join(ck_dir, "gptq")) as f:
    name = f.keys()[0]
    want = f.get_tensor(name, "f32")
    results = [None] * 4

    def work_fn(i):
        results[i] = [f.get_tensor(name, "f32") for _ in range(10)]

    threads = [threading.Thread(target=work_fn, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check("threads: same bits", all(np.array_equal(a, want) for r in results for a in r))

# close() while other threads read: they finish or get "closed", no crash.
f = nibble.open(os.path.join(ck_dir, "gptq"))
name = f.keys()[0]
outcomes = []


def reader():
    try:
        for _ in range(200):
            f.get_tensor(name, "f32")
        outcomes.append("done")
    except ValueError as e:
        outcomes.append(str(e))


readers = [threading.Thread(target=reader) for _ in range(3)]
for t in readers:
    t.start()
f.close()
for t in readers:
    t.join()
check("close during reads: " + str(outcomes),
      len(outcomes) == 3 and all(o == "done" or "closed" in o for o in outcomes))

# Errors: clear, typed, nothing half-done.
g = os.path.join(ck_dir, "model.gguf")
raises("missing file", ValueError, lambda: nibble.open("/nonexistent/x.gguf"), "nonexistent")
raises("bad framework", ValueError, lambda: nibble.open(g, framework="jax"), "framework")
raises("bad device", ValueError, lambda: nibble.open(g, device="cuda"), "cpu")
raises("bad gptq_format", ValueError, lambda: nibble.open(g, gptq_format="v9"), "v1 or v2")
with nibble.open(g) as f:
    q = [n for n in f.keys() if f.info(n)["quantized"]][0]
    raises("unknown tensor", KeyError, lambda: f.get_tensor("nope"), "nope")
    raises("bad dtype", ValueError, lambda: f.get_tensor(q, dtype="int8"), "dtype must be")
    raises("bad threads", ValueError, lambda: nibble.open(g, threads=-1).get_tensor(q), "threads")
f.close()
raises("closed", ValueError, lambda: f.get_tensor(q), "closed")
check("closed flag", f.closed)
u = os.path.join(ck_dir, "unsupported.gguf")
with nibble.open(u) as f:
    bad = [n for n in f.keys() if not f.info(n)["supported"]]
    check("unsupported listed", len(bad) > 0)
    for n in bad:
        raises("unsupported " + n, ValueError, lambda: f.get_tensor(n), f.info(n)["why_not"])

# inspect / dequant mirror the CLI.
info = nibble.inspect(os.path.join(ck_dir, "awq"))
check("inspect", info["description"].startswith("safetensors") and
      any(t["kind"] == "AWQ" for t in info["tensors"]))
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
out = os.path.join(work, "gguf.safetensors")
calls = []
rep = nibble.dequant(g, out, dtype="bf16", threads=2, progress=lambda *a: calls.append(a))
check("dequant report", rep["dequantized"] >= 1 and rep["bytes"] > 0)
check("progress calls " + str(calls[-1:]), len(calls) == rep["dequantized"] + rep["copied"] and
      calls[-1][0] == calls[-1][1] and calls[-1][2] == calls[-1][3] == rep["bytes"])


def bad_callback(*a):
    raise RuntimeError("callback failure")


out2 = os.path.join(work, "gguf_f16.safetensors")
# An exception in the callback stops the conversion and propagates; nothing
# is published.
raises("a failing progress callback stops dequant", RuntimeError,
       lambda: nibble.dequant(g, out2, dtype="f16", progress=bad_callback), "callback failure")
check("nothing written after a failing callback", not os.path.exists(out2) and
      sorted(os.listdir(work)) == ["gguf.safetensors"])
raises("progress not callable", TypeError, lambda: nibble.dequant(g, out2, progress=3),
       "callable")
got = read_safetensors(out)
with nibble.open(g) as f:
    for n in f.keys():
        if f.info(n)["supported"] and n in got:
            check("dequant == get_tensor " + n,
                  np.array_equal(got[n].view(np.uint16), f.get_tensor(n, "bf16").view(np.uint16)))
# Cached parameter blocks returned; the tensors read afterwards are unchanged.
nibble.release_cached_memory()
with nibble.open(g) as f:
    for n in f.keys():
        if f.info(n)["supported"] and n in got:
            check("after release_cached_memory: " + n,
                  np.array_equal(got[n].view(np.uint16), f.get_tensor(n, "bf16").view(np.uint16)))
raises("dequant onto its input", ValueError, lambda: nibble.dequant(g, g), "")
raises("dequant bad dtype", ValueError, lambda: nibble.dequant(g, out, dtype="q4"), "dtype")
hf = os.path.join(work, "hf")
rep = nibble.dequant(os.path.join(ck_dir, "gptq"), hf, dtype="f16")
check("dequant to a model folder", os.path.exists(os.path.join(hf, "config.json")) or
      os.path.exists(os.path.join(hf, "model.safetensors")))
if fold_dir:
    # An ONNX model's weights == the float initializers `fold` writes (read
    # back through nibble.open as copies): two independent paths.
    for m in onnx_models:
        folded_m = os.path.join(work, "folded_" + m)
        nibble.fold(os.path.join(fold_dir, m), folded_m)
        with nibble.open(os.path.join(fold_dir, m)) as f, nibble.open(folded_m) as g:
            q = [k for k in f.keys() if f.info(k)["quantized"]]
            check(m + ": weights listed", len(q) >= 1)
            for k in q:
                a, b = f.get_tensor(k), g.get_tensor(k)
                check(m + ": " + k + " == fold's", a.dtype == b.dtype and a.shape == b.shape and
                      np.array_equal(a.view(np.uint8), b.view(np.uint8)))
    with nibble.open(os.path.join(fold_dir, "qdq_overridable.onnx")) as f:
        why = [f.info(k)["why_not"] for k in f.keys() if not f.info(k)["supported"]]
        check("overridable codes explained: " + str(why), why and all("override" in w for w in why))
    folded = os.path.join(work, "folded.onnx")
    rep = nibble.fold(os.path.join(fold_dir, "qdq_int4.onnx"), folded, threads=2)
    check("fold report " + str(rep), rep["dequantize_nodes"] >= 1 and not rep["external"])
    cli = os.path.join(fold_dir, "folded_qdq_int4.onnx")
    if os.path.exists(cli):
        check("fold == the CLI's fold", open(folded, "rb").read() == open(cli, "rb").read())
raises("fold of a missing model", ValueError,
       lambda: nibble.fold(os.path.join(work, "none.onnx"), os.path.join(work, "o.onnx")), "none")

print("%d passed, %d failed (torch: %s)" % (passed, failed, torch.__version__ if torch else "absent"))
sys.exit(1 if failed else 0)
