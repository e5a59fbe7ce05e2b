"""A few lines of json + numpy that read and write safetensors files for the
tests (no nibble code, no safetensors package): the format is an 8-byte
little-endian header length, a JSON header, then the tensors' bytes."""
import json
import struct

import numpy as np

# Stored dtype -> numpy type of its bits (float8 codes and bfloat16 as raw
# unsigned integers).
NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64,
         "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
         "F8_E4M3": np.uint8, "F8_E5M2": np.uint8, "BOOL": np.uint8}


def write_st(path, tensors, metadata=None):
    """tensors: name -> (dtype string, numpy array holding its bits)."""
    header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def _stored(path):
    """(name, header entry, stored bytes) of each tensor in the file."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    for name, e in json.loads(data[8:8 + n]).items():
        if name != "__metadata__":
            b, en = e["data_offsets"]
            yield name, e, data[8 + n + b:8 + n + en]


def read_st(path):
    """name -> float32 values (F32 / F16 / BF16) or the stored integers."""
    out = {}
    for name, e, raw in _stored(path):
        a = np.frombuffer(raw, NUMPY[e["dtype"]]).reshape(e["shape"])
        if e["dtype"] == "BF16":
            a = bf16_value(a)
        elif e["dtype"] == "F16":
            a = a.astype(np.float32)
        out[name] = a
    return out


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (no NaN inputs)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def read_st_bits(path):
    """name -> the stored values' bits (F32: uint32, F16 / BF16: uint16)."""
    bits = {"F32": np.uint32, "F16": np.uint16, "BF16": np.uint16}
    return {name: np.frombuffer(raw, bits[e["dtype"]]).reshape(e["shape"])
            for name, e, raw in _stored(path)}
