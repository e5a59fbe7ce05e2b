#!/usr/bin/env python3
"""Hostile inputs and command lines for the `nibble` CLI, and their runner.

    hostile_corpus.py make DIR --checkpoints CK --fold-models FM
    hostile_corpus.py run NIBBLE DIR [--timeout S] [--only REGEX]

`make` builds one folder per case under DIR from the test generators'
valid files (make_checkpoints, make_fold_models) plus files written here
(GGUF, safetensors and ONNX bytes are encoded by hand: no third-party
package needed). Each case has a `case.json`: the argument list (paths
relative to the case folder, "{nibble}" stands for nothing), the expected
exit code (or "nonzero"), a fragment the output must contain, and what it
may create.

`run` executes every case with a time limit and asserts: no death by a
signal, no hang, the expected exit code and message fragment, and the case
folder exactly as it was (same names, same types, same bytes, same symlink
targets) apart from outputs a succeeding case declares; files outside the
folder it names (e.g. /dev/null) keep their type. It prints one line per
case and "N passed, M failed".
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time

# --------------------------------------------------------------------------
# Encoders (just enough of each format).


def gguf_string(b):
    return struct.pack("<Q", len(b)) + b


def gguf_file(tensors, kv=()):
    """tensors: list of (name bytes, ne list, ggml type, data bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, v in kv:  # string values only
        out += gguf_string(k) + struct.pack("<I", 8) + gguf_string(v)
    offsets, off = [], 0
    for name, ne, typ, data in tensors:
        off = (off + 31) // 32 * 32
        offsets.append(off)
        off += len(data)
    for (name, ne, typ, data), o in zip(tensors, offsets):
        out += gguf_string(name) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", typ, o)
    out += b"\0" * ((32 - len(out) % 32) % 32)
    base = len(out)
    for (name, ne, typ, data), o in zip(tensors, offsets):
        out += b"\0" * (base + o - len(out)) + data
    return out


def safetensors_file(entries, data, raw_header=None):
    """entries: dict name -> (dtype, shape, begin, end)."""
    if raw_header is None:
        raw_header = json.dumps(
            {k: {"dtype": d, "shape": s, "data_offsets": [b, e]}
             for k, (d, s, b, e) in entries.items()}).encode()
    return struct.pack("<Q", len(raw_header)) + raw_header + data


def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload & 0xFFFFFFFFFFFFFFFF)
    return key + varint(len(payload)) + payload


def pb_tensor(name, dtype, dims, raw=b"", external=None):
    t = b"".join(field(1, 0, d) for d in dims) + field(2, 0, dtype) + field(8, 2, name.encode())
    if external is not None:
        for k, v in external:
            t += field(13, 2, field(1, 2, k.encode()) + field(2, 2, v.encode()))
        t += field(14, 0, 1)
    else:
        t += field(9, 2, raw)
    return t


def pb_attr_int(name, v):
    return field(1, 2, name.encode()) + field(3, 0, v) + field(20, 0, 2)


def pb_node(op, inputs, outputs, attrs=(), domain="", name=""):
    n = b"".join(field(1, 2, i.encode()) for i in inputs)
    n += b"".join(field(2, 2, o.encode()) for o in outputs)
    if name:
        n += field(3, 2, name.encode())
    n += field(4, 2, op.encode())
    n += b"".join(field(5, 2, a) for a in attrs)
    if domain:
        n += field(7, 2, domain.encode())
    return n


def pb_value_info(name, elem_type, dims):
    shape = b"".join(field(1, 2, field(1, 0, d)) for d in dims)
    tensor_type = field(1, 0, elem_type) + field(2, 2, shape)
    return field(1, 2, name.encode()) + field(2, 2, field(1, 2, tensor_type))


def pb_model(nodes, inits, inputs, outputs, ir=8, opsets=(("", 21),)):
    g = b"".join(field(1, 2, n) for n in nodes) + field(2, 2, b"g")
    g += b"".join(field(5, 2, t) for t in inits)
    g += b"".join(field(11, 2, i) for i in inputs)
    g += b"".join(field(12, 2, o) for o in outputs)
    m = field(1, 0, ir)
    for dom, ver in opsets:
        m += field(8, 2, (field(1, 2, dom.encode()) if dom else b"") + field(2, 0, ver))
    return m + field(7, 2, g)


FLOAT, UINT8, INT8, INT4 = 1, 2, 3, 22


def mmnb_model(K=32, N=4, bits=4, block=16, extra_attrs=None, ir=8):
    kb = (K + block - 1) // block if block > 0 else 1
    blob = max(1, block * max(bits, 1) // 8) if block > 0 else 1
    b_dims = [N, kb, blob]
    attrs = [pb_attr_int("K", K), pb_attr_int("N", N), pb_attr_int("bits", bits),
             pb_attr_int("block_size", block)] + (extra_attrs or [])
    nb = 1
    for d in b_dims:
        nb *= d
    inits = [pb_tensor("B", UINT8, b_dims, bytes(nb) if nb < 1 << 20 else b""),
             pb_tensor("scales", FLOAT, [N, kb], b"\0\0\x80\x3f" * (N * kb) if N * kb < 1 << 18 else b"")]
    return pb_model([pb_node("MatMulNBits", ["A", "B", "scales"], ["Y"], attrs, "com.microsoft", "mm")],
                    inits, [pb_value_info("A", FLOAT, [1, K])], [pb_value_info("Y", FLOAT, [1, N])],
                    ir=ir, opsets=(("", 21), ("com.microsoft", 1)))


def qdq_model(dup_init=False, undefined_input=False, overridable=False, ir=8):
    """DequantizeLinear(int8 w [4, 8], scale) -> MatMul(A, w) -> Y."""
    w = pb_tensor("w", INT8, [8, 4], bytes(range(32)))
    s = pb_tensor("s", FLOAT, [], struct.pack("<f", 0.5))
    inits = [w, s] + ([pb_tensor("w", INT8, [8, 4], bytes(32))] if dup_init else [])
    nodes = [pb_node("DequantizeLinear", ["w", "s"], ["wf"], name="dq"),
             pb_node("MatMul", ["A", "missing" if undefined_input else "wf"], ["Y"], name="mm")]
    inputs = [pb_value_info("A", FLOAT, [1, 8])]
    if overridable:
        inputs.append(pb_value_info("s", FLOAT, []))
    return pb_model(nodes, inits, inputs, [pb_value_info("Y", FLOAT, [1, 4])], ir=ir)


# --------------------------------------------------------------------------
# The corpus.


class Corpus:
    def __init__(self, root, ck, fm):
        self.root, self.ck, self.fm = root, ck, fm
        self.count = 0

    def case(self, name, argv, rc="nonzero", msg="", creates=(), check_json=False,
             outside=(), setup=None):
        d = os.path.join(self.root, name)
        os.makedirs(d)
        if setup:
            setup(d)
        with open(os.path.join(d, "case.json"), "w") as f:
            json.dump({"argv": argv, "rc": rc, "msg": msg, "creates": list(creates),
                       "check_json": check_json, "outside": list(outside)}, f, indent=1)
        self.count += 1

    def copy(self, src, dst):
        if os.path.isdir(src):
            shutil.copytree(src, dst)
        else:
            shutil.copy(src, dst)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


F32_4 = struct.pack("<4f", 1, 2, 3, 4)


def make(args):
    root = os.path.abspath(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    c = Corpus(root, os.path.abspath(args.checkpoints), os.path.abspath(args.fold_models))
    CK, FM = c.ck, c.fm
    gptq = lambda d: c.copy(os.path.join(CK, "gptq"), os.path.join(d, "gptq"))
    awq = lambda d: c.copy(os.path.join(CK, "awq"), os.path.join(d, "awq"))
    gguf = lambda d: c.copy(os.path.join(CK, "model.gguf"), os.path.join(d, "model.gguf"))
    qdq_ext = lambda d: (c.copy(os.path.join(FM, "qdq_external.onnx"), os.path.join(d, "m.onnx")),
                         c.copy(os.path.join(FM, "qdq_external.onnx.data"),
                                os.path.join(d, "qdq_external.onnx.data")))

    # 1. Names that are not UTF-8: printed escaped, JSON valid, dequant refuses.
    bad_name = gguf_file([(b"blk.\xff\xfe.weight", [4], 0, F32_4)])
    c.case("gguf_name_not_utf8_inspect", ["inspect", "m.gguf"], 0, "blk.\\xff\\xfe.weight",
           setup=lambda d: write(os.path.join(d, "m.gguf"), bad_name))
    c.case("gguf_name_not_utf8_inspect_json", ["inspect", "m.gguf", "--format", "json"], 0,
           "blk.\\\\xff\\\\xfe.weight", check_json=True,
           setup=lambda d: write(os.path.join(d, "m.gguf"), bad_name))
    c.case("gguf_name_not_utf8_dequant", ["dequant", "m.gguf", "out.safetensors"], 1,
           "is not valid UTF-8", setup=lambda d: write(os.path.join(d, "m.gguf"), bad_name))
    c.case("gguf_value_not_utf8_inspect_json", ["inspect", "m.gguf", "--format", "json"], 0,
           "\\\\xc3(", check_json=True,
           setup=lambda d: write(os.path.join(d, "m.gguf"),
                                 gguf_file([(b"w", [4], 0, F32_4)], [(b"general.name", b"x\xc3(")])))
    weird = "m\udcff.gguf"  # the byte 0xff in a file name
    c.case("file_name_not_utf8_inspect_json", ["inspect", weird, "--format", "json"], 0,
           "m\\\\xff.gguf", check_json=True,
           setup=lambda d: write(os.path.join(d, weird), gguf_file([(b"w", [4], 0, F32_4)])))
    c.case("file_name_not_utf8_dequant", ["dequant", weird, "out.safetensors"], 0,
           "dequantized 0 and copied 1", creates=["out.safetensors"],
           setup=lambda d: write(os.path.join(d, weird), gguf_file([(b"w", [4], 0, F32_4)])))

    # 2. Thread counts.
    for cmd, extra in (("dequant", ["gptq", "out.safetensors"]), ("fold", ["m.onnx", "out.onnx"]),
                       ("demo", ["--shape", "64,256"]), ("test", ["."])):
        for t in ("100000", "40000", "-1", "2147483648"):
            def setup(d, cmd=cmd):
                if cmd == "dequant":
                    gptq(d)
                if cmd == "fold":
                    qdq_ext(d)
            c.case(f"threads_{cmd}_{t.lstrip('-')}{'_neg' if t.startswith('-') else ''}",
                   [cmd] + extra + ["--threads", t], "nonzero", "--threads", setup=setup)
    c.case("threads_bench", ["bench", "--shape", "64,256", "--threads", "5000"], "nonzero",
           "--threads")

    # 3. Sizes that overflow or do not fit.
    c.case("demo_shape_huge", ["demo", "--shape", "99999999,99999999"], 1, "out of memory")
    c.case("demo_shape_overflow", ["demo", "--shape", "9999999999,9999999999"], 2, "overflow")
    c.case("demo_shape_int64_overflow", ["demo", "--shape", "99999999999999999999,2"], 2,
           "--shape must be N,K")

    # 4. MatMulNBits attributes read before validation.
    for nm, kw, msg in (("bits_0", dict(bits=0), "attribute bits must be 4 or 8 (got 0)"),
                        ("bits_64", dict(bits=64), "attribute bits must be 4 or 8 (got 64)"),
                        ("bits_neg", dict(bits=-3), "attribute bits must be 4 or 8 (got -3)"),
                        ("k_negative", dict(K=-5), "K and N must be positive"),
                        ("kn_overflow", dict(K=1 << 40, N=1 << 40, block=16),
                         "is too large"),
                        ("block_0", dict(block=0), "block_size must be a power of two"),
                        ("block_3", dict(block=3), "block_size must be a power of two")):
        model = mmnb_model(**kw)
        for cmd in ("inspect", "fold"):
            argv = [cmd, "m.onnx"] + (["out.onnx"] if cmd == "fold" else [])
            c.case(f"mmnb_{nm}_{cmd}", argv, 1, msg,
                   setup=lambda d, model=model: write(os.path.join(d, "m.onnx"), model))
    c.case("mmnb_attr_wrong_type_inspect", ["inspect", "m.onnx"], 1, "attribute bits must be of type INT",
           setup=lambda d: write(os.path.join(d, "m.onnx"), mmnb_model(extra_attrs=[
               field(1, 2, b"bits") + varint(2 << 3 | 5) + struct.pack("<f", 4.0) +
               field(20, 0, 1)])))

    # 5. Special files as inputs; oversized metadata.
    def fifo(name):
        return lambda d: os.mkfifo(os.path.join(d, name))
    c.case("fifo_model_inspect", ["inspect", "m.onnx"], 1, "is a FIFO", setup=fifo("m.onnx"))
    c.case("fifo_model_fold", ["fold", "m.onnx", "out.onnx"], 1, "is a FIFO", setup=fifo("m.onnx"))
    c.case("fifo_gguf_inspect", ["inspect", "m.gguf"], 1, "is a FIFO", setup=fifo("m.gguf"))
    c.case("fifo_safetensors_dequant", ["dequant", "m.safetensors", "out.safetensors"], 1,
           "is a FIFO", setup=fifo("m.safetensors"))

    def fifo_in(folder_fn, name):
        def s(d):
            folder_fn(d)
            sub = os.path.join(d, os.listdir(d)[0])
            os.remove(os.path.join(sub, name))
            os.mkfifo(os.path.join(sub, name))
        return s
    c.case("fifo_config_dequant", ["dequant", "gptq", "out.safetensors"], 1, "is a FIFO",
           setup=fifo_in(gptq, "config.json"))
    c.case("fifo_shard_dequant", ["dequant", "awq", "out.safetensors"], 1, "is a FIFO",
           setup=fifo_in(awq, "model-00002-of-00002.safetensors"))
    c.case("fifo_index_inspect", ["inspect", "awq"], 1, "is a FIFO",
           setup=fifo_in(awq, "model.safetensors.index.json"))

    def qdq_fifo_data(d):
        qdq_ext(d)
        os.remove(os.path.join(d, "qdq_external.onnx.data"))
        os.mkfifo(os.path.join(d, "qdq_external.onnx.data"))
    c.case("fifo_external_data_fold", ["fold", "m.onnx", "out.onnx"], 1, "is a FIFO",
           setup=qdq_fifo_data)
    c.case("dev_zero_inspect", ["inspect", "/dev/zero"], 1, "is a character device")
    c.case("dev_zero_dequant", ["dequant", "/dev/zero", "out.safetensors"], 1, "character device")

    def config_to_dev_zero(d):
        gptq(d)
        os.remove(os.path.join(d, "gptq", "config.json"))
        os.symlink("/dev/zero", os.path.join(d, "gptq", "config.json"))
    c.case("config_symlink_dev_zero", ["dequant", "gptq", "out.safetensors"], 1,
           "outside the model folder", setup=config_to_dev_zero)

    def config_huge(d):
        gptq(d)
        with open(os.path.join(d, "gptq", "config.json"), "r+b") as f:
            f.truncate(65 << 20)  # sparse: costs no disk
    c.case("config_over_64_mib", ["dequant", "gptq", "out.safetensors"], 1,
           "more than the 67108864-byte limit", setup=config_huge)

    def index_huge(d):
        awq(d)
        with open(os.path.join(d, "awq", "model.safetensors.index.json"), "r+b") as f:
            f.truncate(65 << 20)
    c.case("index_over_64_mib", ["inspect", "awq"], 1, "more than the 67108864-byte limit",
           setup=index_huge)

    # 6. Many safetensors entries: linear parsing (a duplicate at the end).
    def many_entries(d, n=200000, dup=True):
        parts = ['"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i for i in range(n)]
        if dup:
            parts.append('"t7":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}')
        write(os.path.join(d, "m.safetensors"), safetensors_file({}, b"", ("{" + ",".join(parts) + "}").encode()))
    c.case("safetensors_200k_entries_duplicate", ["inspect", "m.safetensors"], 1,
           "has the key 't7' twice", setup=many_entries)
    c.case("safetensors_200k_entries", ["inspect", "m.safetensors", "--format", "json"], 0,
           '"count": 200000', check_json=True, setup=lambda d: many_entries(d, 200000, False))

    # 7. The output is an input, by any spelling.
    c.case("dequant_out_is_input_same_path", ["dequant", "gptq/model.safetensors",
                                               "gptq/model.safetensors"], 1, "is the input file",
           setup=gptq)
    c.case("dequant_out_is_input_dot_slash", ["dequant", "gptq/model.safetensors",
                                               "./gptq/model.safetensors"], 1, "is the input file",
           setup=gptq)
    c.case("dequant_out_is_input_double_slash", ["dequant", "gptq", "gptq//model.safetensors"], 1,
           "is the input file", setup=gptq)

    def hardlink(d):
        gptq(d)
        os.link(os.path.join(d, "gptq", "model.safetensors"), os.path.join(d, "hl.safetensors"))
    c.case("dequant_out_is_hard_link_to_input", ["dequant", "gptq", "hl.safetensors"], 1,
           "is the input file", setup=hardlink)

    def symlink_out(d):
        gptq(d)
        os.symlink("gptq/model.safetensors", os.path.join(d, "sl.safetensors"))
    c.case("dequant_out_is_symlink_to_input", ["dequant", "gptq", "sl.safetensors"], 1,
           "is a symbolic link", setup=symlink_out)
    c.case("dequant_out_is_a_shard", ["dequant", "awq", "awq/model-00001-of-00002.safetensors"], 1,
           "is the input file", setup=awq)
    c.case("dequant_out_is_the_config", ["dequant", "gptq", "gptq/config.json"], 1,
           "is the input file", setup=gptq)
    c.case("dequant_out_is_the_input_folder", ["dequant", "gptq", "gptq"], 1, "is the input folder",
           setup=gptq)
    c.case("fold_out_is_input", ["fold", "m.onnx", "./m.onnx"], 1, "is the input file", setup=qdq_ext)
    c.case("fold_out_is_abs_input", ["fold", "m.onnx", "{case}/m.onnx"], 1, "is the input file",
           setup=qdq_ext)
    c.case("fold_out_is_input_data", ["fold", "m.onnx", "qdq_external.onnx.data"], 1,
           "is the input file", setup=qdq_ext)
    c.case("fold_external_name_is_input_data",
           ["fold", "m.onnx", "out.onnx", "--external-data=qdq_external.onnx.data"], 1,
           "is the input file", setup=qdq_ext)

    def fold_default_data_is_input(d):
        qdq_ext(d)
        # The output's default data file name (out.onnx.data) is the input's data.
        os.link(os.path.join(d, "qdq_external.onnx.data"), os.path.join(d, "out.onnx.data"))
    c.case("fold_default_data_name_is_input_data",
           ["fold", "m.onnx", "out.onnx", "--external-data"], 1, "is the input file",
           setup=fold_default_data_is_input)

    # 8. A failed fold leaves every file as it was (an unrelated X.data too).
    def fold_fail_with_data(d):
        qdq_ext(d)
        write(os.path.join(d, "out.onnx.data"), b"unrelated bytes")
        os.mkdir(os.path.join(d, "out.onnx"))
    c.case("fold_fails_keeps_unrelated_data", ["fold", "m.onnx", "out.onnx", "--external-data"], 1,
           "is a directory", setup=fold_fail_with_data)

    def fold_bad_node_with_data(d):
        write(os.path.join(d, "m.onnx"), mmnb_model(bits=3))
        write(os.path.join(d, "out.onnx.data"), b"unrelated bytes")
    c.case("fold_invalid_keeps_unrelated_data", ["fold", "m.onnx", "out.onnx", "--external-data"], 1,
           "attribute bits must be 4 or 8", setup=fold_bad_node_with_data)

    # 9. Existing outputs that are not regular files.
    c.case("dequant_out_dev_null", ["dequant", "gptq", "/dev/null"], 1, "character device",
           setup=gptq, outside=["/dev/null"])
    c.case("fold_out_dev_null", ["fold", "m.onnx", "/dev/null"], 1, "character device",
           setup=qdq_ext, outside=["/dev/null"])
    c.case("dequant_out_fifo", ["dequant", "gptq", "out.safetensors"], 1, "is a FIFO",
           setup=lambda d: (gptq(d), os.mkfifo(os.path.join(d, "out.safetensors"))))
    c.case("fold_out_fifo", ["fold", "m.onnx", "out.onnx"], 1, "is a FIFO",
           setup=lambda d: (qdq_ext(d), os.mkfifo(os.path.join(d, "out.onnx"))))
    c.case("fold_external_data_out_fifo", ["fold", "m.onnx", "out.onnx", "--external-data"], 1,
           "is a FIFO", setup=lambda d: (qdq_ext(d), os.mkfifo(os.path.join(d, "out.onnx.data"))))
    c.case("dequant_out_dangling_symlink", ["dequant", "gptq", "out.safetensors"], 1,
           "is a symbolic link",
           setup=lambda d: (gptq(d), os.symlink("nowhere", os.path.join(d, "out.safetensors"))))
    c.case("dequant_out_symlink_to_file", ["dequant", "gptq", "out.safetensors"], 1,
           "is a symbolic link",
           setup=lambda d: (gptq(d), write(os.path.join(d, "target"), b"keep"),
                            os.symlink("target", os.path.join(d, "out.safetensors"))))

    # 10. Links and '..' that leave the model folder.
    def outside_link(folder_fn, name, target_rel):
        def s(d):
            folder_fn(d)
            sub = os.path.join(d, os.listdir(d)[0])
            os.makedirs(os.path.join(d, "elsewhere"), exist_ok=True)
            os.rename(os.path.join(sub, name), os.path.join(d, "elsewhere", name))
            os.symlink(target_rel + name, os.path.join(sub, name))
        return s
    c.case("shard_symlink_outside", ["dequant", "gptq", "out.safetensors"], 1,
           "outside the model folder", setup=outside_link(gptq, "model.safetensors", "../elsewhere/"))
    c.case("shard_symlink_outside_abs", ["inspect", "awq"], 1, "outside the model folder",
           setup=lambda d: (awq(d), os.rename(os.path.join(d, "awq", "model-00001-of-00002.safetensors"),
                                              os.path.join(d, "x.safetensors")),
                            os.symlink(os.path.join(d, "x.safetensors"),
                                       os.path.join(d, "awq", "model-00001-of-00002.safetensors"))))
    c.case("config_symlink_outside", ["dequant", "gptq", "out.safetensors"], 1,
           "outside the model folder", setup=outside_link(gptq, "config.json", "../elsewhere/"))

    def index_dotdot(d):
        awq(d)
        p = os.path.join(d, "awq", "model.safetensors.index.json")
        j = json.load(open(p))
        k = next(iter(j["weight_map"]))
        j["weight_map"][k] = "../model-00001-of-00002.safetensors"
        json.dump(j, open(p, "w"))
    c.case("index_names_dotdot", ["dequant", "awq", "out.safetensors"], 1,
           "shards must be relative paths inside the folder", setup=index_dotdot)

    def external_symlink_outside(d):
        os.makedirs(os.path.join(d, "model"))
        os.makedirs(os.path.join(d, "elsewhere"))
        c.copy(os.path.join(FM, "qdq_external.onnx"), os.path.join(d, "model", "m.onnx"))
        c.copy(os.path.join(FM, "qdq_external.onnx.data"),
               os.path.join(d, "elsewhere", "qdq_external.onnx.data"))
        os.symlink("../elsewhere/qdq_external.onnx.data",
                   os.path.join(d, "model", "qdq_external.onnx.data"))
    c.case("external_data_symlink_outside", ["fold", "model/m.onnx", "out.onnx"], 1,
           "outside the model folder", setup=external_symlink_outside)

    # The Hugging Face hub cache: snapshot files are links into ../../blobs.
    def hub_cache(d, escape=False):
        repo = os.path.join(d, "models--org--m")
        snap = os.path.join(repo, "snapshots", "0123abc")
        os.makedirs(os.path.join(repo, "blobs"))
        os.makedirs(snap)
        os.makedirs(os.path.join(d, "outside"))
        src = os.path.join(CK, "gptq")
        for i, n in enumerate(sorted(os.listdir(src))):
            blob = os.path.join(d, "outside" if escape and n == "config.json" else
                                os.path.join(repo, "blobs"), f"blob{i}")
            shutil.copy(os.path.join(src, n), blob)
            os.symlink(os.path.relpath(blob, snap), os.path.join(snap, n))
    c.case("hf_hub_cache_layout", ["dequant", "models--org--m/snapshots/0123abc", "out.safetensors"],
           0, "dequantized 1 (to float16) and copied 1", creates=["out.safetensors"],
           setup=hub_cache)
    c.case("hf_hub_cache_link_leaves_repo", ["dequant", "models--org--m/snapshots/0123abc",
                                              "out.safetensors"], 1, "outside the model folder",
           setup=lambda d: hub_cache(d, escape=True))

    # 11. Graphs ONNX Runtime would reject, and overridable initializers.
    c.case("fold_duplicate_initializer", ["fold", "m.onnx", "out.onnx"], 1, "is defined twice",
           setup=lambda d: write(os.path.join(d, "m.onnx"), qdq_model(dup_init=True)))
    c.case("fold_undefined_input", ["fold", "m.onnx", "out.onnx"], 1, "input 'missing' is not defined",
           setup=lambda d: write(os.path.join(d, "m.onnx"), qdq_model(undefined_input=True)))
    c.case("fold_overridable_initializer_kept", ["fold", "m.onnx", "out.onnx"], 0,
           "1 quantized node(s) left as they are", creates=["out.onnx"],
           setup=lambda d: write(os.path.join(d, "m.onnx"), qdq_model(overridable=True)))
    c.case("fold_ir3_initializers_in_inputs_folded", ["fold", "m.onnx", "out.onnx"], 0,
           "folded 1 DequantizeLinear", creates=["out.onnx"],
           setup=lambda d: write(os.path.join(d, "m.onnx"), qdq_model(overridable=True, ir=3)))

    # 12. Bad or unreadable models: an error, never "0 weights".
    c.case("inspect_empty_onnx", ["inspect", "m.onnx"], 1, "has no graph",
           setup=lambda d: write(os.path.join(d, "m.onnx"), b""))
    c.case("inspect_text_onnx", ["inspect", "m.onnx"], 1, "not a valid onnx.ModelProto",
           setup=lambda d: write(os.path.join(d, "m.onnx"), b"hello, this is not a model\n"))
    c.case("inspect_missing", ["inspect", "nope.onnx"], 1, "No such file")
    c.case("inspect_directory_onnx", ["inspect", "d.onnx"], 1, "is a directory",
           setup=lambda d: os.mkdir(os.path.join(d, "d.onnx")))
    c.case("fold_empty_onnx", ["fold", "m.onnx", "out.onnx"], 1, "has no graph",
           setup=lambda d: write(os.path.join(d, "m.onnx"), b""))

    # Truncations and corruptions of the real files.
    def truncated(src, name, n):
        def s(d):
            data = open(src, "rb").read()
            write(os.path.join(d, name), data[:n])
        return s
    gguf_bytes = os.path.join(CK, "model.gguf")
    for n in (0, 3, 4, 20, 100, 500):
        c.case(f"gguf_truncated_{n}_inspect", ["inspect", "m.gguf"], 1, "",
               setup=truncated(gguf_bytes, "m.gguf", n) if n else (lambda d: write(os.path.join(d, "m.gguf"), b"GGUF")))
    c.case("safetensors_header_len_huge", ["inspect", "m.safetensors"], 1, "exceeds the",
           setup=lambda d: write(os.path.join(d, "m.safetensors"), struct.pack("<Q", 1 << 62) + b"{}"))
    c.case("safetensors_bad_json", ["inspect", "m.safetensors"], 1, "is not valid JSON",
           setup=lambda d: write(os.path.join(d, "m.safetensors"), safetensors_file({}, b"", b"{\"a\":")))
    c.case("dequant_tensors_bad_regex", ["dequant", "model.gguf", "out.safetensors", "--tensors", "("], 1,
           "not a valid regex", setup=gguf)
    c.case("dequant_out_in_missing_dir", ["dequant", "model.gguf", "no/such/dir/out.safetensors"], 1,
           "its folder 'no/such/dir': No such file or directory", setup=gguf)
    c.case("fold_external_name_with_slash", ["fold", "m.onnx", "out.onnx", "--external-data=a/b"], 1,
           "must be a plain file name", setup=qdq_ext)
    print(f"{c.count} cases in {root}")


# --------------------------------------------------------------------------
# The runner.


def snapshot(root):
    """path -> (type, content digest or link target) for everything under root."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                out[rel] = ("file", h.hexdigest(), st.st_ino, st.st_size)
            else:
                out[rel] = (stat.S_IFMT(st.st_mode),)
    return out


def run(args):
    root = os.path.abspath(args.dir)
    nibble = os.path.abspath(args.nibble)
    passed = failed = 0
    only = re.compile(args.only) if args.only else None
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.isfile(os.path.join(d, "case.json")) or (only and not only.search(name)):
            continue
        case = json.load(open(os.path.join(d, "case.json")))
        before = snapshot(d)
        outside = {p: stat.S_IFMT(os.stat(p).st_mode) for p in case["outside"]}
        argv = [nibble] + [a.replace("{case}", d) for a in case["argv"]]
        argv = [os.fsencode(a) for a in argv]
        t0 = time.monotonic()
        problems = []
        try:
            p = subprocess.run(argv, cwd=d, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=args.timeout)
            rc, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out = None, (e.stdout or b"") + (e.stderr or b"")
            problems.append(f"hung (> {args.timeout} s)")
        sec = time.monotonic() - t0
        text = out.decode("utf-8", "replace")
        if rc is not None and rc < 0:
            problems.append(f"killed by signal {signal.Signals(-rc).name}")
        elif rc is not None and rc >= 128:
            problems.append(f"exit {rc} (a crash)")
        elif rc is not None:
            want = case["rc"]
            if want == "nonzero" and rc == 0:
                problems.append("exit 0, expected an error")
            elif want != "nonzero" and rc != want:
                problems.append(f"exit {rc}, expected {want}")
        if case["msg"] and case["msg"] not in text:
            problems.append(f"output lacks '{case['msg']}'")
        if case["check_json"] and rc == 0:
            try:
                json.loads(p.stdout.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                problems.append(f"--format json output is not valid JSON: {e}")
        after = snapshot(d)
        for rel in set(before) | set(after):
            if before.get(rel) != after.get(rel) and rel not in case["creates"]:
                what = ("appeared" if rel not in before else
                        "disappeared" if rel not in after else "changed")
                problems.append(f"'{rel}' {what}")
        for rel in case["creates"]:
            if rel not in after:
                problems.append(f"expected output '{rel}' missing")
        for pth, mode in outside.items():
            if stat.S_IFMT(os.lstat(pth).st_mode) != mode:
                problems.append(f"'{pth}' changed type")
                if pth == "/dev/null":  # a regression replaced it: put it back
                    try:
                        os.remove(pth)
                        os.mknod(pth, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
                        os.chmod(pth, 0o666)  # mknod's mode went through the umask
                    except OSError as e:
                        problems.append(f"could not restore /dev/null: {e}")
        if problems:
            failed += 1
            print(f"FAIL {name} ({sec:.1f} s): {'; '.join(problems)}\n     output: {text.strip()[:400]}")
        else:
            passed += 1
            print(f"PASS {name} (exit {rc}, {sec:.1f} s): {text.strip().splitlines()[-1][:160] if text.strip() else ''}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--checkpoints", required=True)
    m.add_argument("--fold-models", required=True)
    r = sub.add_parser("run")
    r.add_argument("nibble")
    r.add_argument("dir")
    r.add_argument("--timeout", type=float, default=float(os.environ.get("HOSTILE_TIMEOUT", "10")))
    r.add_argument("--only")
    args = ap.parse_args()
    if args.cmd == "make":
        make(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
