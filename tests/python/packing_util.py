"""The int32 word packings of GPTQ / AWQ / compressed-tensors in numpy, for
the tests (no nibble code): codes of `bits` bits, 32 / bits to a word,
field j in bits [bits * j, bits * (j + 1))."""
import numpy as np


def pack_rows(codes, bits):
    """[R, C] codes -> int32 [R * bits / 32, C], field j of word r = row r * (32/bits) + j."""
    f = 32 // bits
    c = codes.astype(np.uint64).reshape(-1, f, codes.shape[1])
    w = np.zeros((c.shape[0], codes.shape[1]), np.uint64)
    for j in range(f):
        w |= c[:, j, :] << np.uint64(bits * j)
    return (w & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def pack_cols(codes, bits, order=None):
    """[R, C] codes -> int32 [R, C * bits / 32], field j of word c = column c * f + order[j]."""
    f = 32 // bits
    order = order or list(range(f))
    c = codes.astype(np.uint64).reshape(codes.shape[0], -1, f)
    w = np.zeros(c.shape[:2], np.uint64)
    for j in range(f):
        w |= c[:, :, order[j]] << np.uint64(bits * j)
    return (w & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def unpack_cols(words, bits):
    f = 32 // bits
    u = words.view(np.uint32).astype(np.uint64)
    return np.stack([(u >> np.uint64(bits * j)) & np.uint64((1 << bits) - 1) for j in range(f)],
                    axis=2).reshape(words.shape[0], -1).astype(np.int64)
