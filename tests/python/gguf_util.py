"""A few lines of struct + numpy that write small GGUF v3 files for the tests
(no nibble code, no gguf package): metadata key-values, then F32 / F16
tensors, each aligned to 32 bytes; and read their F32 tensors back."""
import struct

import numpy as np

GGML_F32, GGML_F16 = 0, 1

# Every block type current ggml defines (besides Q8_1 / Q8_K, activation
# types): ggml type id -> (name, elements per block, bytes per block, whether
# ggml's quantizer needs an imatrix).
GGML_BLOCK_TYPES = {
    2: ("q4_0", 32, 18, False), 3: ("q4_1", 32, 20, False), 6: ("q5_0", 32, 22, False),
    7: ("q5_1", 32, 24, False), 8: ("q8_0", 32, 34, False), 10: ("q2_K", 256, 84, False),
    11: ("q3_K", 256, 110, False), 12: ("q4_K", 256, 144, False),
    13: ("q5_K", 256, 176, False), 14: ("q6_K", 256, 210, False),
    16: ("iq2_xxs", 256, 66, True), 17: ("iq2_xs", 256, 74, True),
    18: ("iq3_xxs", 256, 98, False), 19: ("iq1_s", 256, 50, True),
    20: ("iq4_nl", 32, 18, False), 21: ("iq3_s", 256, 110, False),
    22: ("iq2_s", 256, 82, False), 23: ("iq4_xs", 256, 136, False),
    29: ("iq1_m", 256, 56, True), 34: ("tq1_0", 256, 54, False), 35: ("tq2_0", 256, 66, False),
    39: ("mxfp4", 32, 17, False), 40: ("nvfp4", 64, 36, False), 41: ("q1_0", 128, 18, False),
    42: ("q2_0", 64, 18, False),
}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def kv_str(k, v):
    return kv(k, 8, gstr(v))


def kv_u32(k, v):
    return kv(k, 4, struct.pack("<I", v))


def kv_f32(k, v):
    return kv(k, 6, struct.pack("<f", v))


def kv_bool(k, v):
    return kv(k, 7, struct.pack("<B", int(v)))


def kv_strs(k, items):
    return kv(k, 9, struct.pack("<IQ", 8, len(items)) + b"".join(gstr(x) for x in items))


def kv_f32s(k, items):
    return kv(k, 9, struct.pack("<IQ", 6, len(items)) + np.asarray(items, "<f4").tobytes())


def kv_i32s(k, items):
    return kv(k, 9, struct.pack("<IQ", 5, len(items)) + np.asarray(items, "<i4").tobytes())


def write_gguf(path, kvs, tensors):
    """tensors: (GGUF name, numpy array in gguf-py's order: shape = reversed
    ne); float16 arrays are stored F16, everything else F32. A tensor given
    as (name, (ggml type id, ne, raw bytes)) is stored as those bytes."""
    infos, data = b"", b""
    for name, a in tensors:
        if isinstance(a, tuple):
            t, ne, raw = a
        else:
            ne = list(reversed(a.shape))
            t = GGML_F16 if a.dtype == np.float16 else GGML_F32
            raw = a.astype("<f2" if t == GGML_F16 else "<f4").tobytes()
        infos += gstr(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        infos += struct.pack("<IQ", t, len(data))
        data += raw
        data += b"\0" * (-len(data) % 32)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head + data)


def read_gguf_f32(path):
    """name -> float32 array of the F32 tensors of a file write_gguf wrote
    (metadata of the types above only)."""
    with open(path, "rb") as f:
        b = f.read()
    n_t, n_kv = struct.unpack_from("<QQ", b, 8)
    o = 24

    def s(o):
        n = struct.unpack_from("<Q", b, o)[0]
        return b[o + 8:o + 8 + n].decode(), o + 8 + n

    def skip(t, o):
        if t == 8:
            return s(o)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, o)
            o += 12
            for _ in range(n):
                o = skip(et, o)
            return o
        return o + {4: 4, 5: 4, 6: 4, 7: 1}[t]
    for _ in range(n_kv):
        _, o = s(o)
        t = struct.unpack_from("<I", b, o)[0]
        o = skip(t, o + 4)
    infos = []
    for _ in range(n_t):
        name, o = s(o)
        nd = struct.unpack_from("<I", b, o)[0]
        ne = struct.unpack_from("<%dQ" % nd, b, o + 4)
        t, off = struct.unpack_from("<IQ", b, o + 4 + 8 * nd)
        o += 4 + 8 * nd + 12
        infos.append((name, ne, t, off))
    base = o + (-o % 32)
    out = {}
    for name, ne, t, off in infos:
        if t == GGML_F32:
            n = int(np.prod(ne))
            out[name] = np.frombuffer(b, "<f4", n, base + off).reshape(tuple(reversed(ne)))
    return out
