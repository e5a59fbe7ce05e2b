"""nibble: exact, fast dequantization of grouped-quantized int4/int8 weights.

Open a checkpoint the way ``safetensors.safe_open`` does::

    import nibble
    with nibble.open("model.gguf") as f:               # or a GPTQ/AWQ folder
        for name in f.keys():
            w = f.get_tensor(name, dtype="bf16")         # numpy array
    with nibble.open("llama-gptq/", framework="pt") as f:
        w = f.get_tensor("model.layers.0.mlp.up_proj.weight", dtype="bf16")
        rows = f.get_slice("model.embed_tokens.weight")[1000:2000]

Checkpoints: GGUF files (llama.cpp block types), Hugging Face folders or
.safetensors files quantized with GPTQ (v1/v2, 2/4/8-bit, act-order), AWQ,
compressed-tensors (pack-quantized, int-quantized) and bitsandbytes 4-bit
(NF4/FP4, double quantization), and ONNX models (constant DequantizeLinear
weights under their output names, MatMulNBits weights as "<B>_dequantized"
in [K, N] as ``nibble fold`` writes them); float tensors are copied
(converted to the requested type). Hugging Face tensors are returned under
their dequantized names (``<prefix>.weight``, PyTorch's [out_features,
in_features] order).

Output types: ``dtype=None`` (the checkpoint's default: the scales' type
for Hugging Face checkpoints, float32 for GGUF), ``"float32"``
(``"f32"``, ``"fp32"``, ``"float"``), ``"float16"`` (``"f16"``, ``"fp16"``,
``"half"``) or ``"bfloat16"`` (``"bf16"``). numpy has no bfloat16: with
``framework="np"`` a bfloat16 tensor is a ``uint16`` array of its bits
(``ml_dtypes.bfloat16`` when ``ml_dtypes`` is importable); with
``framework="pt"`` it is a ``torch.bfloat16`` tensor sharing the memory.
Every value is exactly what the producer's own loader computes, on every
CPU and for every thread count; f16/bf16 are rounded once (to nearest even)
from the exact float32 value.

Lower-level pieces: :func:`dequantize_pmx`, :func:`dequantize_onnx`,
:class:`Dequantizer` (the DequantizeLinear operator on numpy buffers),
:func:`quantize`, and :func:`dequant`, :func:`fold`, :func:`inspect`, which
mirror the ``nibble`` command line. The GIL is released while nibble works.
"""
import collections.abc

from ._nibble import (  # noqa: F401  (re-exported)
    Dequantizer,
    __version__,
    active_target,
    blas,
    dequantize_onnx,
    dequantize_pmx,
    quantize,
    release_cached_memory,
)
from . import _nibble

__all__ = [
    "open", "load_file", "Checkpoint", "TensorSlice", "GgufArray", "dequant", "fold", "inspect", "Dequantizer",
    "dequantize_pmx", "dequantize_onnx", "quantize", "matmul", "active_target", "blas",
    "release_cached_memory", "__version__",
]

_FRAMEWORKS = {"np": "np", "numpy": "np", "pt": "pt", "torch": "pt", "pytorch": "pt"}


def _path(p):
    """A path argument (str, bytes or os.PathLike) as the bytes the OS sees."""
    import os
    return os.fsencode(os.fspath(p))


def _dtype_name(dtype):
    """None or a str spelling; numpy and torch dtypes are accepted too."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    text = str(dtype)
    if text.startswith("torch."):  # torch.bfloat16 -> "bfloat16"
        return text[len("torch."):]
    try:
        import numpy
        return numpy.dtype(dtype).name  # np.float16, np.dtype("float32"), ...
    except TypeError:
        return text


class GgufArray(collections.abc.Sequence):
    """A GGUF metadata array longer than a few elements, as
    :meth:`metadata` returns it: ``len()`` is known at once; indexing,
    iteration or ``list()`` read the whole array from the file the first
    time (strings, or Python ints / floats / bools)."""

    def __init__(self, ref):
        self._ref, self._items = ref, None

    @property
    def elem_type(self):
        """The GGUF element type: 'string', 'f32', 'i32', 'u32', ..."""
        return self._ref.elem_type

    def _load(self):
        if self._items is None:
            self._items = self._ref.load()
        return self._items

    def __len__(self):
        return self._ref.count

    def __getitem__(self, i):
        return self._load()[i]

    def __eq__(self, other):
        if isinstance(other, (list, tuple, GgufArray)):
            return len(self) == len(other) and list(self._load()) == list(other)
        return NotImplemented

    def __repr__(self):
        return f"GgufArray({self.elem_type}, {len(self)} elements)"

class TensorSlice:
    """Rows of one tensor, read on indexing: ``f.get_slice(name)[a:b]``.

    The first index selects rows (only those are decoded); further indices
    are applied to the result. ``get_shape()`` and ``get_dtype()`` describe
    the whole tensor without reading it.
    """

    def __init__(self, checkpoint, name, dtype):
        self._ck, self._name, self._dtype = checkpoint, name, dtype
        self._info = checkpoint.info(name)

    def get_shape(self):
        return list(self._info["shape"])

    def get_dtype(self):
        """The element type as safetensors names it ("F16", "BF16", "F32",
        ...): the tensor's default output type, or the one requested."""
        if self._dtype is None:
            return self._info["safetensors_dtype"]
        return _nibble.safetensors_dtype(self._dtype)

    def __getitem__(self, index):
        rest = ()
        if isinstance(index, tuple):
            index, rest = (index[0], index[1:]) if index else (slice(None), ())
        shape = self._info["shape"]
        rows = shape[0] if shape else 1
        if isinstance(index, slice):
            start, stop, step = index.indices(rows)
            if step == 1:
                out = self._ck._read(self._name, self._dtype, start, max(start, stop))
            else:
                lo, hi = (start, stop) if step > 0 else (stop + 1, start + 1)
                lo, hi = max(lo, 0), max(hi, max(lo, 0))
                out = self._ck._read(self._name, self._dtype, lo, hi)
                out = out[::step] if step > 0 else out[::-1][:: -step]
                out = out[: len(range(start, stop, step))]
        elif isinstance(index, int) or hasattr(index, "__index__"):
            i = int(index)
            if i < 0:
                i += rows
            if not 0 <= i < rows:
                raise IndexError(f"row {int(index)} is outside the tensor's {rows} rows")
            out = self._ck._read(self._name, self._dtype, i, i + 1)[0]
            return out[rest] if rest else out
        elif index is Ellipsis:
            out = self._ck._read(self._name, self._dtype, 0, rows)
            return out[(Ellipsis,) + rest] if rest else out
        else:
            raise TypeError("index rows with an int or a slice")
        return out[(slice(None),) + rest] if rest else out


class Checkpoint:
    """An open checkpoint (see :func:`open`). Use it as a context manager,
    or call :meth:`close`. Reads from several Python threads at once are
    safe and run in parallel (the GIL is released)."""

    def __init__(self, path, framework="np", *, gptq_format=None, gptq_v1_zeros=None,
                 threads=0):
        fw = _FRAMEWORKS.get(str(framework).lower())
        if fw is None:
            raise ValueError(f"framework must be 'np' or 'pt' (got {framework!r})")
        if fw == "pt":
            import torch  # noqa: F401  (fail at open time, not on the first read)
        self._fw, self._threads = fw, threads
        self._ck = _nibble._Checkpoint(_path(path), gptq_format or "", gptq_v1_zeros or "")
        # Names only: a tensor's info is built when asked for (a checkpoint
        # may list a hundred thousand tensors).
        self._names = self._ck.names()

    # --- safetensors.safe_open's interface -------------------------------
    def keys(self):
        """Output names of every tensor, sorted (as safetensors' safe_open
        returns them; :meth:`tensors` keeps the checkpoint's order). Names
        that are not valid UTF-8 (a GGUF file may hold them) are decoded
        with ``surrogateescape``, like ``os.fsdecode``: pass them back as
        they are."""
        return sorted(self._names)

    def metadata(self):
        """The files' own metadata as a dict, as safe_open's metadata(): a
        safetensors file's ``__metadata__`` (str -> str; every shard's for
        a folder); ``{}`` when there is none. A GGUF file's key / values
        are typed, as gguf-py reads them: int, float, bool, str, and
        arrays — a list when short, else a :class:`GgufArray` that reads
        its elements from the file on first use (a tokenizer's vocabulary
        costs nothing until it is indexed)."""
        typed = self._ck.gguf_metadata()
        if typed is not None:
            return {k: GgufArray(v) if isinstance(v, _nibble._GgufArrayRef) else v
                    for k, v in typed}
        return dict(self._ck.metadata())

    def properties(self):
        """What ``nibble inspect`` shows: the format's and the quantization
        method's settings (quantization, bits, group_size,
        checkpoint_format, ...), as a dict of str -> str."""
        return dict(self._ck.properties())

    def get_tensor(self, name, dtype=None):
        """The whole tensor ``name`` (output or stored name), dequantized."""
        return self._read(name, dtype, 0, None)

    def get_slice(self, name, dtype=None):
        """A :class:`TensorSlice`: rows are decoded only when indexed."""
        return TensorSlice(self, self._resolve(name), _dtype_name(dtype))

    # --- more ------------------------------------------------------------
    def info(self, name):
        """A dict: name, source, kind ("GPTQ", "q4_K", "copy", ...), detail,
        shape, quantized, supported, why_not, stored_bytes, stored_dtype and
        dtype (the default output type)."""
        return self._ck.info(name)

    def tensors(self):
        """:meth:`info` of every tensor."""
        return self._ck.tensors()

    def dequantizer(self, name, dtype=None):
        """A prepared :class:`Dequantizer` of the quantized tensor ``name``
        (its packed inputs read once, kept with the checkpoint's file
        handles): ``.matmul(x)`` multiplies by it straight from the packing,
        ``.tile(...)`` decodes pieces, ``.run()`` all of it. The weight's
        values are those of ``get_tensor(name, dtype)``."""
        return self._ck.dequantizer(name, _dtype_name(dtype))

    def matmul(self, name, x, bias=None, *, weight="out_in", expert=None, threads=0,
               out_dtype=None, gemm="exact"):
        """``x @ W.T (+ bias)`` for the quantized weight ``name`` ([N, K],
        as ``get_tensor`` returns it; ``weight="in_out"``: ``x @ W`` for a
        [K, N] one) without writing the float weight out: see
        :meth:`Dequantizer.matmul`. A 3-D tensor of MoE experts ([E, N, K],
        gpt-oss's [E, K, N] with ``weight="in_out"``): W is expert
        ``expert``'s matrix. Prepares the weight on each call: keep
        :meth:`dequantizer` for repeated products."""
        return self.dequantizer(name).matmul(x, bias, weight=weight, expert=expert,
                                             threads=threads, out_dtype=_dtype_name(out_dtype),
                                             gemm=gemm)

    def description(self):
        return self._ck.description()

    def close(self):
        self._ck.close()

    @property
    def closed(self):
        return self._ck.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __contains__(self, name):
        return isinstance(name, (str, bytes)) and self._ck.resolve(name) is not None

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self._names)

    def __repr__(self):
        state = "closed" if self.closed else self._ck.description()
        return f"<nibble.Checkpoint {state}>"

    def _resolve(self, name):
        out = self._ck.resolve(name) if isinstance(name, (str, bytes)) else None
        if out is None:
            raise KeyError(f"no tensor named {name!r}")
        return out

    def _read(self, name, dtype, start, stop):
        name = self._resolve(name)
        array, out_dtype = self._ck.read(name, _dtype_name(dtype), start, stop, self._threads)
        return _wrap(array, out_dtype, self._fw)


def _matmul_operand(t, what):
    """Matmul operand t as the extension takes it: (numpy array, its
    x_dtype spelling or None, the torch module when t was a torch tensor).
    A CPU torch tensor or a numpy array is used in place when C-contiguous
    and copied when not (X is the small operand: a strided view such as
    x.T or x[:, ::2] is not refused); a torch tensor's bfloat16 as its
    uint16 bits; another device is refused by name. Other array-likes
    (lists) go through np.asarray, so a wrong element type is refused by
    its name. The element type is never converted."""
    import sys
    import numpy as np
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(t, torch.Tensor):
        if t.device.type != "cpu":
            raise ValueError("matmul: %s is a torch tensor on %s; nibble multiplies on the CPU "
                             "(pass %s.cpu())" % (what, t.device, what))
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view("uint16"), "bfloat16", torch
        return t.numpy(), None, torch
    return np.ascontiguousarray(t), None, None


_extension_matmul = Dequantizer.matmul


def _dequantizer_matmul(self, x, bias=None, *, weight="out_in", threads=0, out_dtype=None,
                        x_dtype=None, expert=None, gemm="exact"):
    xa, xd, torch = _matmul_operand(x, "x")
    ba = bias
    if bias is not None:
        ba, bd, _ = _matmul_operand(bias, "bias")
        if bd == "bfloat16":  # bfloat16 -> float32 is exact
            import numpy as np
            ba = (ba.astype(np.uint32) << 16).view(np.float32)
    y = _extension_matmul(self, xa, ba, weight=weight, threads=threads,
                          out_dtype=_dtype_name(out_dtype), x_dtype=x_dtype or xd, expert=expert,
                          gemm=gemm)
    if torch is None:
        return y
    # (Y in X's type: bfloat16 bits when X was bfloat16)
    return _wrap(y, "bfloat16" if xd == "bfloat16" and y.dtype.itemsize == 2 else None, "pt")


_dequantizer_matmul.__doc__ = (_extension_matmul.__doc__ or "") + """

x and bias: numpy arrays or CPU torch tensors (float32 / float16 /
bfloat16), used in place when C-contiguous and copied when not (a view such
as x.T works); for a torch x, y is a torch tensor (torch.bfloat16 for a
bfloat16 Y)."""
Dequantizer.matmul = _dequantizer_matmul


def matmul(w, x, bias=None, **options):
    """``y = x @ W.T (+ bias)`` straight from the packing of the prepared
    weight ``w`` (a :class:`Dequantizer`, e.g. ``Checkpoint.dequantizer(name)``):
    ``w.matmul(x, bias, **options)``. x / bias: numpy arrays or CPU torch
    tensors (float32, float16, bfloat16); options: weight ("out_in" / "in_out"),
    expert, threads, out_dtype, gemm ("exact" / "blas"). The GIL is released
    while it runs."""
    if not isinstance(w, Dequantizer):
        raise TypeError("matmul: w must be a nibble.Dequantizer (Checkpoint.dequantizer(name), "
                        "Dequantizer.pmx / .onnx), not %s" % type(w).__name__)
    return w.matmul(x, bias, **options)


def _wrap(array, dtype, fw):
    """array as numpy or torch; dtype is nibble's name of its element type."""
    if fw == "pt":
        import numpy as np
        import torch
        if dtype == "bfloat16":
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(array)
    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            return array
        return array.view(ml_dtypes.bfloat16)
    return array


def open(path, framework="np", device="cpu", *, gptq_format=None, gptq_v1_zeros=None,
         threads=0):
    """Open a checkpoint: a GGUF file, a .safetensors file, a Hugging Face
    model folder (config.json + safetensors shards) or an ONNX model.

    framework: "np" (numpy arrays) or "pt" (torch tensors, zero-copy).
    device: "cpu" only (tensors are decoded on the CPU).
    gptq_format: "v1" or "v2" when a GPTQ checkpoint does not state it.
    gptq_v1_zeros: "autogptq", "autogptq-cuda" or "gptqmodel" to override how v1 zero points
    are decoded (default: by the producer the checkpoint names).
    threads: 0 = all cores, n = at most n threads per read.
    Raises ValueError (with the file and the problem) for what it cannot read.
    """
    if device not in ("cpu", None):
        raise ValueError(f"device must be 'cpu' (got {device!r}); move the tensor afterwards")
    return Checkpoint(path, framework, gptq_format=gptq_format, gptq_v1_zeros=gptq_v1_zeros,
                      threads=threads)


def dequant(input, output, *, dtype=None, tensors="", exclude="", skip_unsupported=False,
            threads=0, hf=False, max_shard_bytes=5_000_000_000, gptq_format=None,
            gptq_v1_zeros=None, progress=None):
    """``nibble dequant``: convert a checkpoint (GGUF, Hugging Face, ONNX) to
    float safetensors.

    A Hugging Face input with ``output`` not ending in ".safetensors" (or
    ``hf=True``) becomes a loadable model folder. Written atomically: nothing
    is left at ``output`` on error. ``progress``: a callable receiving
    (tensors_done, tensors_total, bytes_done, bytes_total) after each tensor
    (bytes_total 0 when unknown); an exception it raises stops the
    conversion and propagates. ``max_shard_bytes``: the largest shard of a
    model folder, in bytes or as transformers writes it ("5GB", "500MB",
    "4GiB"). :func:`nibble.distributed.convert` runs the same conversion
    shard-parallel on a Dask cluster. Ctrl-C (KeyboardInterrupt) stops it too,
    between tensors or 16 MiB row chunks: nothing is published, temporaries
    are removed, and the exception is raised. Paths: str, bytes or
    os.PathLike. Returns a dict: dequantized, copied, bytes, skipped, notes
    (e.g. stale temporaries of a killed run that were removed)."""
    args = _dequant_args(dtype=dtype, tensors=tensors, exclude=exclude,
                         skip_unsupported=skip_unsupported, threads=threads, hf=hf,
                         max_shard_bytes=max_shard_bytes, gptq_format=gptq_format,
                         gptq_v1_zeros=gptq_v1_zeros)
    return _nibble.dequant(_path(input), _path(output), args, progress)


def _dequant_args(*, dtype=None, tensors="", exclude="", skip_unsupported=False, threads=0,
                  hf=False, max_shard_bytes=5_000_000_000, gptq_format=None, gptq_v1_zeros=None):
    """:func:`dequant`'s options, checked, for the extension."""
    return _nibble._DequantArgs(dtype=_dtype_name(dtype), tensors=tensors, exclude=exclude,
                                skip_unsupported=skip_unsupported, threads=threads, hf=hf,
                                max_shard_bytes=max_shard_bytes, gptq_format=gptq_format or "",
                                gptq_v1_zeros=gptq_v1_zeros or "")


def fold(input, output, *, threads=0, external_data=False, progress=None):
    """``nibble fold``: an ONNX model with every constant DequantizeLinear /
    MatMulNBits weight replaced by its float value. ``external_data``: False
    (inline, unless the model exceeds 2 GB), True (a data file
    "<output name>.data" beside the model) or a file name for it.
    ``progress`` as for :func:`dequant`. Returns a dict report."""
    if isinstance(external_data, (str, bytes)):
        name = external_data.decode() if isinstance(external_data, bytes) else external_data
        external, external_name = bool(name), name
    else:
        external, external_name = bool(external_data), ""
    return _nibble.fold(_path(input), _path(output), threads=threads, external=external,
                        external_name=external_name, progress=progress)


def inspect(path, *, gptq_format=None, gptq_v1_zeros=None):
    """``nibble inspect`` of a checkpoint, as a dict: description,
    properties (dict), metadata (dict) and tensors (:meth:`Checkpoint.info`
    of each)."""
    with Checkpoint(path, gptq_format=gptq_format, gptq_v1_zeros=gptq_v1_zeros) as f:
        return {"description": f.description(), "properties": f.properties(),
                "metadata": f.metadata(), "tensors": f.tensors()}


def load_file(path, dtype=None, framework="np", *, threads=0, **open_options):
    """Every tensor of a checkpoint as a dict name -> tensor, like
    ``safetensors.numpy.load_file`` / ``safetensors.torch.load_file``
    (``framework="pt"``): quantized layers dequantized to ``dtype`` (see
    :func:`open`), float tensors converted to it. Tensors nibble cannot
    read raise ValueError naming them."""
    with Checkpoint(path, framework, threads=threads, **open_options) as f:
        return {name: f.get_tensor(name, dtype) for name in f.keys()}

