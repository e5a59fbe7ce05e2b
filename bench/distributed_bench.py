"""Throughput of nibble.distributed on this machine, beside the one-process
conversion and the disk: writes a DeepSeek-style FP8 checkpoint (float8
e4m3 weights, 128x128 float32 block scales) of SIZE_GB of weights in input
shards, then, interleaved ROUNDS times:
  * `nibble dequant SRC OUT --dtype bf16` (one process, all cores),
  * nibble.distributed.convert without a client (this process),
  * nibble.distributed.convert on a LocalCluster of WORKERS processes x 1 thread,
  * the disk: SIZE_GB x 2 bytes written and fsynced (what the conversion writes),
and prints one JSON line per run (seconds, output GB/s, per-shard seconds)
plus the rate of nibble's XXH64 read-back (what a verified resume reads).

Usage: distributed_bench.py NIBBLE_CLI WORK_DIR [SIZE_GB=2] [WORKERS=2] [ROUNDS=3]
Run with PYTHONPATH pointing at the nibble module (build/python).
"""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "python"))
from safetensors_util import write_st  # noqa: E402

import nibble.distributed as nd  # noqa: E402


def make_fp8(src, size_gb):
    os.makedirs(src)
    rng = np.random.default_rng(1)
    n = k = 4096
    per_tensor = n * k
    tensors = max(1, int(size_gb * 1e9 // per_tensor))
    per_file = 8
    index = {}
    files = -(-tensors // per_file)
    codes = rng.integers(0, 0x7E, (n, k), dtype=np.uint8)
    for f in range(files):
        t = {}
        for i in range(f * per_file, min(tensors, (f + 1) * per_file)):
            p = "model.layers.%d.mlp.up_proj." % i
            t[p + "weight"] = ("F8_E4M3", np.roll(codes, i))
            t[p + "weight_scale_inv"] = ("F32", rng.random((n // 128, k // 128))
                                         .astype(np.float32))
        name = "model-%05d-of-%05d.safetensors" % (f + 1, files)
        write_st(os.path.join(src, name), t)
        index.update({x: name for x in t})
    with open(os.path.join(src, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {}, "weight_map": index}, fh)
    with open(os.path.join(src, "config.json"), "w") as fh:
        json.dump({"model_type": "llama", "quantization_config": {
            "quant_method": "fp8", "weight_block_size": [128, 128]}}, fh)
    return tensors * per_tensor


def disk_write(path, nbytes):
    buf = os.urandom(1 << 24)
    t = time.monotonic()
    with open(path, "wb", buffering=0) as f:
        left = nbytes
        while left > 0:
            left -= f.write(buf[:min(left, len(buf))])
        os.fsync(f.fileno())
    s = time.monotonic() - t
    os.remove(path)
    return s


def main():
    cli, work = sys.argv[1], os.path.abspath(sys.argv[2])
    size_gb = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    src = os.path.join(work, "fp8")
    elements = make_fp8(src, size_gb)
    out_bytes = elements * 2
    shard = "500MB"
    print(json.dumps({"machine_cores": os.cpu_count(), "input_gb": elements / 1e9,
                      "output_gb": out_bytes / 1e9, "max_shard_size": shard,
                      "workers": workers}), flush=True)
    from nibble import _nibble
    blob = os.path.join(work, "hash-blob")
    with open(blob, "wb") as f:
        f.write(os.urandom(1 << 29))
    _nibble._xxh64_file(blob)  # in the page cache
    t = time.monotonic()
    _nibble._xxh64_file(blob)
    print(json.dumps({"xxh64_file_gb_s": (1 << 29) / 1e9 / (time.monotonic() - t)}), flush=True)
    os.remove(blob)

    import distributed
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=50) as cluster, \
            distributed.Client(cluster) as client:
        for r in range(rounds):
            out = os.path.join(work, "out")
            runs = [
                ("nibble dequant (one process)", lambda: subprocess.run(
                    [cli, "dequant", src, out, "--dtype", "bf16", "--max-shard-size", shard],
                    check=True, capture_output=True)),
                ("distributed, no client", lambda: nd.convert(src, out, None, dtype="bf16",
                                                              max_shard_bytes=shard)),
                ("distributed, LocalCluster %d x 1 thread" % workers,
                 lambda: nd.convert(src, out, client, dtype="bf16", max_shard_bytes=shard)),
                ("disk: write + fsync", lambda: disk_write(os.path.join(work, "blob"),
                                                           out_bytes)),
            ]
            for name, fn in runs:
                shutil.rmtree(out, ignore_errors=True)
                subprocess.run(["sync"])
                t = time.monotonic()
                rep = fn()
                s = time.monotonic() - t
                row = {"round": r, "run": name, "seconds": round(s, 3),
                       "output_gb_s": round(out_bytes / 1e9 / s, 3)}
                if isinstance(rep, dict) and "records" in rep:
                    row["shard_seconds"] = [round(x["seconds"], 3)
                                            for x in rep["records"].values()]
                print(json.dumps(row), flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
