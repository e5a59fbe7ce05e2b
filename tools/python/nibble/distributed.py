"""Shard-parallel conversion on Dask: :func:`convert` fans ``nibble dequant``
into a model folder out over a ``distributed.Client`` — one task per output
shard, each calling nibble in its worker — and gives the same bytes as one
process.

    from distributed import Client
    import nibble.distributed
    client = Client("tcp://scheduler:8786")        # or Client(LocalCluster(...))
    report = nibble.distributed.convert("/shared/DeepSeek-V3", "/shared/DeepSeek-V3-bf16",
                                        client, dtype="bf16")

How a run goes:

1. The driver (the process calling :func:`convert`) opens the input and
   derives the plan: every tensor, its output type and shape, the shard it
   goes into — exactly what ``nibble dequant`` would write — and the job's
   key (input files by path, size and modification time; the options; the
   nibble version).
2. Shards are written into the staging folder ``<dst>.nibble-partial``
   beside ``dst`` (same file system: it is renamed at the end), one task
   per shard. A worker writes its shard atomically (a temporary, fsynced,
   then named) — its XXH64 checksum computed as the bytes go out — and
   then the shard's record ``<shard>.nibble-done.json`` (name, key, size,
   checksum, host), also atomically. A
   worker whose own plan differs from the driver's key (the input changed,
   another nibble version) writes nothing and fails the run.
3. Only when every shard reported success does the driver write the index,
   ``config.json`` and the tokenizer files, remove the records, and rename
   the staging folder to ``dst``. Until then nothing exists at ``dst``: a
   half-finished run never looks complete.

Resuming: a run that stopped (an error, Ctrl-C, a lost driver, workers
killed more often than the scheduler's ``allowed-failures``) keeps the
staging folder. Running the same conversion again skips every shard whose
record matches the job's key and whose file has the recorded size and (with
``verify="hash"``, the default) XXH64 — read back by the workers, in
parallel — and writes the rest. A staging folder of a different job (other
input, options or version) is refused, not overwritten: delete it.

Workers need nibble and read access to ``src``, write access to the staging
folder: a shared file system (NFS, Lustre, a FUSE-mounted bucket) on a
cluster. Without a client, the same steps run in this process, one shard
after another.

Dask is optional: importing this module works without it; passing a
scheduler address without ``distributed`` installed says what to install.
"""
import json
import os
import socket
import sys
import time
import uuid

from . import _nibble

STAGING_SUFFIX = ".nibble-partial"
_JOB = "nibble-job.json"
_RECORD = ".nibble-done.json"
_STOP = "nibble-stop"  # present while a failed run drains its tasks: they start nothing
_INSTALL = ("nibble.distributed needs Dask's distributed scheduler: on Debian "
            "`apt-get install python3-distributed`, elsewhere `pip install \"dask[distributed]\"`")

try:  # optional
    import distributed as _dd
except ImportError:  # pragma: no cover - depends on the machine
    _dd = None


def available():
    """Whether Dask's ``distributed`` is importable here."""
    return _dd is not None


def _abs(p):
    """An absolute str path: workers elsewhere do not share our working folder."""
    return os.path.abspath(os.fsdecode(os.fspath(p)))


def _reraise(e, message):
    """`e`'s type with `message`, chained to `e` (RuntimeError when that type
    cannot be built from one message)."""
    try:
        new = type(e)(message)
    except Exception:  # noqa: BLE001 - e.g. an exception type with other arguments
        new = RuntimeError(message)
    raise new from e


def _args(opts):
    from . import _dequant_args
    return _dequant_args(**opts)


def _write_json_atomic(path, obj):
    """`obj` as JSON at `path`, replacing it in one step (fsynced)."""
    tmp = "%s.tmp-%s-%d" % (path, socket.gethostname(), os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        return obj if isinstance(obj, dict) else None
    except (OSError, ValueError):
        return None


def _worker_threads(threads):
    """`threads`, or with 0 in a Dask worker: its cores shared among its task
    slots (several shards at once must not each take every core)."""
    if threads or _dd is None:
        return threads
    try:
        worker = _dd.get_worker()
    except ValueError:  # not in a worker
        return threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    state = getattr(worker, "state", worker)  # distributed >= 2022.11: Worker.state.nthreads
    return max(1, (cores or 1) // max(1, state.nthreads))


def _shard_task(src, dst, staging, index, name, key, opts, verify, progress):
    """Writes shard `index` (`name`) into `staging` unless a verified copy is
    there; returns its record (with "reused")."""
    started = time.monotonic()
    if os.path.exists(os.path.join(staging, _STOP)):  # the run failed: start nothing
        return {"name": name, "stopped": True}
    path = os.path.join(staging, name)
    rec_path = path + _RECORD
    rec = _read_json(rec_path)
    if rec is not None:
        ok = (rec.get("key") == key and rec.get("name") == name and os.path.isfile(path)
              and not os.path.islink(path) and os.path.getsize(path) == rec.get("bytes"))
        if ok and verify == "hash":
            ok = _nibble._xxh64_file(path) == rec.get("xxh64")
        if ok:
            return dict(rec, reused=True, seconds=time.monotonic() - started)
        os.remove(rec_path)  # stale or damaged: the shard is written again
    opts = dict(opts, threads=_worker_threads(opts.get("threads", 0)))
    cb = None
    if progress is not None:
        def cb(done, total, nbytes, total_bytes):
            progress(name, done, total)
    step = _nibble._dequant_step(src, dst, _args(opts), "shard", staging, index, key, cb)
    rec = {"name": name, "key": key, "bytes": os.path.getsize(path), "xxh64": step["xxh64"],
           "host": socket.gethostname()}
    _write_json_atomic(rec_path, rec)
    return dict(rec, reused=False, seconds=time.monotonic() - started)


def _file_task(src, dst, opts):
    from . import dequant
    opts = dict(opts, threads=_worker_threads(opts.get("threads", 0)))
    return dequant(src, dst, **opts)


def _client(client):
    if client is None:
        return None
    if isinstance(client, str):
        if _dd is None:
            raise ImportError(_INSTALL)
        return _dd.Client(client)
    if not callable(getattr(client, "submit", None)):
        raise TypeError("client must be a distributed.Client, a scheduler address or None, not %s"
                        % type(client).__name__)
    return client


def _open_staging(staging, key, shard_names):
    """Creates or adopts the staging folder of job `key`; returns a locked
    descriptor of it (one driver per staging folder at a time)."""
    import fcntl
    if os.path.islink(staging) or (os.path.exists(staging) and not os.path.isdir(staging)):
        raise ValueError("'%s' is in the way: it should be this conversion's staging folder "
                         "(remove it)" % staging)
    os.makedirs(staging, exist_ok=True)
    fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise RuntimeError("another conversion is writing '%s' (its staging folder is locked)"
                           % staging) from None
    if os.path.exists(os.path.join(staging, _STOP)):
        os.remove(os.path.join(staging, _STOP))  # left by a driver that died draining
    job_path = os.path.join(staging, _JOB)
    job = _read_json(job_path)
    if job is None and os.listdir(staging):
        os.close(fd)
        raise ValueError("'%s' holds files but no %s: not a staging folder of nibble "
                         "(remove it)" % (staging, _JOB))
    if job is not None and job.get("key") != key:
        os.close(fd)
        raise ValueError("'%s' holds the partial output of a different conversion (another input, "
                         "options or nibble version): delete it to start over" % staging)
    if job is None:
        _write_json_atomic(job_path, {"key": key, "shards": shard_names,
                                      "nibble": _nibble.__version__})
    return fd


def _remove_leftovers(staging, keep):
    """Removes what is not part of the finished folder: records, the job file,
    temporaries of killed writers (every task is done: none is live)."""
    for n in os.listdir(staging):
        if n in keep:
            continue
        if (n in (_JOB, _STOP) or n.endswith(_RECORD) or ".nibble-tmp-" in n
                or _RECORD + ".tmp-" in n):
            os.remove(os.path.join(staging, n))


def convert(src, dst, client=None, *, dtype=None, tensors="", exclude="", skip_unsupported=False,
            hf=False, max_shard_bytes=5_000_000_000, gptq_format=None, gptq_v1_zeros=None,
            threads=0, verify="hash", progress=None, worker_progress=None):
    """Converts `src` to the float model folder `dst` as ``nibble dequant``
    does (same options, byte for byte the same files), one task per output
    shard on `client` (a ``distributed.Client``, a scheduler address, or
    None: in this process).

    ``threads``: threads per shard task (0: a worker's cores divided among
    its task slots). ``verify``: how a resumed run checks a shard recorded
    as complete: "hash" (size and XXH64, read back by the workers) or
    "size". ``progress(shard_name, shards_done, shards_total)`` is called in
    this process as shards finish; ``worker_progress(shard_name,
    tensors_done, tensors_total)`` runs in the worker after each tensor (it
    must be picklable; an exception it raises fails that shard).

    A `dst` ending in ".safetensors" (one file, no ``hf``) is one task.
    Returns a dict: shards, written, reused, bytes, seconds, dequantized,
    copied, skipped, notes, records (shard name -> bytes, xxh64, host,
    seconds, reused).
    On failure it raises the worker's error prefixed with the shard's name;
    complete shards stay in ``<dst>.nibble-partial`` for the next run.
    """
    started = time.monotonic()
    src, dst = _abs(src), _abs(dst)
    if verify not in ("hash", "size"):
        raise ValueError("verify must be 'hash' or 'size', not %r" % (verify,))
    opts = dict(dtype=dtype, tensors=tensors, exclude=exclude, skip_unsupported=skip_unsupported,
                hf=hf, max_shard_bytes=max_shard_bytes, gptq_format=gptq_format,
                gptq_v1_zeros=gptq_v1_zeros, threads=threads)
    args = _args(opts)  # checks the options here, before any task
    client = _client(client)
    if dst.endswith(".safetensors") and not hf:
        if client is None:
            rep = _file_task(src, dst, opts)
        else:
            rep = client.submit(_file_task, src, dst, opts, pure=False).result()
        return dict(rep, shards=1, written=1, reused=0, records={},
                    seconds=time.monotonic() - started)

    plan = _nibble._dequant_step(src, dst, args, "plan")
    key = plan["key"]
    shards = plan["shards"]
    names = [s[0] for s in shards]
    staging = dst.rstrip("/") + STAGING_SUFFIX
    fd = _open_staging(staging, key, names)
    try:
        records = {}

        def failed(name, err):
            kept = sum(1 for n in names if os.path.exists(os.path.join(staging, n + _RECORD)))
            return "shard %s: %s (%d of %d shards are complete in '%s': run the same conversion " \
                   "again to resume, or delete it)" % (name, err, kept, len(names), staging)

        if client is None:
            for i, name in enumerate(names):
                try:
                    records[name] = _shard_task(src, dst, staging, i, name, key, opts, verify,
                                                worker_progress)
                except Exception as e:
                    _reraise(e, failed(name, e))
                if progress is not None:
                    progress(name, len(records), len(names))
        else:
            futures = {}
            run = uuid.uuid4().hex[:12]  # a rerun's tasks never alias an earlier run's
            for i, name in enumerate(names):
                f = client.submit(_shard_task, src, dst, staging, i, name, key, opts, verify,
                                  worker_progress, pure=False, key="nibble-%s-%s" % (name, run))
                futures[f] = name
            try:
                for f in _dd.as_completed(list(futures)):
                    name = futures[f]
                    try:
                        records[name] = f.result()
                    except _dd.KilledWorker as e:
                        raise RuntimeError(failed(name, "the workers running it died (%s)" % e)) \
                            from e
                    except Exception as e:
                        _reraise(e, failed(name, e))
                    if progress is not None:
                        progress(name, len(records), len(names))
            except Exception:
                # Drain: tasks not started yet return at once (the stop file),
                # running ones finish their shard; when this raises, nothing
                # writes into the staging folder any more.
                stop = os.path.join(staging, _STOP)
                open(stop, "w").close()
                try:
                    _dd.wait(list(futures))
                finally:
                    os.remove(stop)
                raise
            except BaseException:  # Ctrl-C: stop now; a rerun rewrites any shard in flight
                client.cancel(list(futures))
                raise
        # Every shard is complete: the small files, then the folder appears.
        _nibble._dequant_step(src, dst, args, "index", staging, 0, key)
        _remove_leftovers(staging, set(names))
        try:
            os.rename(staging, dst)
        except OSError as e:
            raise OSError(e.errno, "cannot publish '%s' (is it an empty folder still?): %s; the "
                          "finished conversion is in '%s'" % (dst, e.strerror, staging)) from None
        parent = os.open(os.path.dirname(os.path.abspath(dst)) or ".", os.O_RDONLY)
        try:
            os.fsync(parent)
        finally:
            os.close(parent)
    finally:
        os.close(fd)
    return {"shards": len(names), "written": sum(not r["reused"] for r in records.values()),
            "reused": sum(r["reused"] for r in records.values()),
            "bytes": sum(s[1] for s in shards), "seconds": time.monotonic() - started,
            "dequantized": plan["dequantized"], "copied": plan["copied"],
            "skipped": plan["skipped"], "notes": plan["notes"],
            "records": {n: {k: r[k] for k in ("bytes", "xxh64", "host", "seconds", "reused")}
                        for n, r in records.items()}}


def _main(argv=None):
    """``python3 -m nibble.distributed SRC DST [--scheduler ADDRESS] ...``"""
    import argparse
    p = argparse.ArgumentParser(
        prog="python3 -m nibble.distributed",
        description="nibble dequant into a model folder, one Dask task per output shard "
                    "(resumable; the same bytes as one process).")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--scheduler", help="a Dask scheduler address (tcp://host:8786); without it "
                   "the shards are written in this process")
    p.add_argument("--dtype", help="f32, f16 or bf16 (default: the format's own)")
    p.add_argument("--hf", action="store_true", help="GGUF -> a Hugging Face model folder")
    p.add_argument("--max-shard-size", default="5GB", help="largest shard (5GB, 500MB, 4GiB)")
    p.add_argument("--tensors", default="", help="only input names matching this regex")
    p.add_argument("--exclude", default="", help="leave out input names matching this regex")
    p.add_argument("--skip-unsupported", action="store_true")
    p.add_argument("--threads", type=int, default=0,
                   help="threads per shard task (0: a worker's cores / its task slots)")
    p.add_argument("--verify", choices=("hash", "size"), default="hash",
                   help="how a resumed run checks kept shards (default: size and XXH64)")
    a = p.parse_args(argv)
    from nibble import distributed  # tasks by qualified name, not __main__
    def show(name, done, total):
        print("%d/%d %s" % (done, total, name), flush=True)
    try:
        rep = distributed.convert(
            a.src, a.dst, a.scheduler, dtype=a.dtype, hf=a.hf, max_shard_bytes=a.max_shard_size,
            tensors=a.tensors, exclude=a.exclude, skip_unsupported=a.skip_unsupported,
            threads=a.threads, verify=a.verify, progress=show)
    except KeyboardInterrupt:
        print("interrupted: complete shards are kept in '%s'; run the same command again to "
              "resume" % (a.dst.rstrip("/") + STAGING_SUFFIX), file=sys.stderr)
        return 130
    except (OSError, ValueError, RuntimeError, ImportError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    for n in rep["notes"]:
        print("note: " + n)
    print("wrote '%s': %d shards (%d written, %d verified and kept), %.2f GB in %.1f s" % (
        a.dst, rep["shards"], rep["written"], rep["reused"], rep["bytes"] / 1e9, rep["seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
