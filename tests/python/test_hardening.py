"""What a hostile user does to the CLI and the Python module, and what must
hold: several threads' first reads at once (fresh processes, repeated), Ctrl-C
/ SIGTERM / SIGKILL in the middle of a conversion (CLI and Python), two
writers of one output, temporaries of other runs, output paths that are
files, NUL bytes, special files or inside the checkpoint, paths as bytes and
os.PathLike, names that are not UTF-8, fold's external data.
Usage: test_hardening.py NIBBLE_CLI CHECKPOINT_DIR FOLD_MODELS_DIR WORK_DIR [REPEATS]
"""
import json
import os
import pathlib
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np

import nibble

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interrupt_util import ctrl_c_stops  # noqa: E402
from safetensors_util import write_st  # noqa: E402

cli, ck_dir, fold_dir, work = sys.argv[1:5]
repeats = int(sys.argv[5]) if len(sys.argv) > 5 else 20
passed = failed = 0


def check(name, cond):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name, flush=True)


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


def host_tag():
    h = socket.gethostname()[:40]
    return "".join(c if c.isascii() and (c.isalnum() or c == ".") else "_" for c in h) or "host"


def leftovers(folder):
    return sorted(e for e in os.listdir(folder) if ".nibble-tmp-" in e or ".nibble-old-" in e)


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = dict(os.environ)
py = sys.executable

# --- 1. N threads' first reads at once, in fresh processes ------------------
race = os.path.join(work, "race.py")
with open(race, "w") as f:
    f.write("import sys\nfrom concurrent.futures import ThreadPoolExecutor\nimport nibble\n"
            "f = nibble.open(sys.argv[1])\n"
            "names = [n for n in f.keys() if f.info(n)['supported']]\n"
            "with ThreadPoolExecutor(int(sys.argv[2])) as ex:\n"
            "    out = list(ex.map(f.get_tensor, names))\n"
            "print('read', len(out))\n")
for target in ("model.gguf", "gptq"):
    ok = 0
    for i in range(repeats):
        try:
            p = subprocess.run([py, race, os.path.join(ck_dir, target), str(2 + i % 3)],
                               capture_output=True, text=True, timeout=60, env=env)
            ok += p.returncode == 0 and p.stdout.startswith("read")
        except subprocess.TimeoutExpired:
            pass
    check("first reads from several threads at once, %s: %d of %d fresh processes finished"
          % (target, ok, repeats), ok == repeats)

# --- 2. A checkpoint that takes a while to convert --------------------------
big = os.path.join(work, "big")
os.makedirs(big)
rows, cols = 4096, 8192  # 64 MiB of float16 per tensor, 128 MiB as float32
with open(os.path.join(big, "config.json"), "w") as f:
    json.dump({"model_type": "llama", "torch_dtype": "float16"}, f)
blob = (np.arange(rows * cols, dtype=np.uint32) % 30000).astype(np.uint16).reshape(rows, cols)
write_st(os.path.join(big, "model.safetensors"), {"w%d" % i: ("F16", blob) for i in range(4)})
del blob
out_dir = os.path.join(work, "outs")
os.makedirs(out_dir)


def start_and_wait_for_temporary(cmd, out, timeout=20):
    """Starts cmd; returns it once it has made a temporary of `out` (one that
    did not exist before it started), or when it exits or `timeout` passes."""
    base = os.path.basename(out) + ".nibble-tmp-"
    before = set(os.listdir(os.path.dirname(out)))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    t0 = time.time()
    while time.time() - t0 < timeout and p.poll() is None:
        if any(e.startswith(base) and e not in before
               for e in os.listdir(os.path.dirname(out))):
            return p
        time.sleep(0.002)
    return p


for sig in (signal.SIGINT, signal.SIGTERM):
    out = os.path.join(out_dir, "folder_" + sig.name)
    p = start_and_wait_for_temporary([cli, "dequant", big, out, "--dtype", "f32"], out)
    time.sleep(0.05)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    check("CLI %s: dies of the signal (rc %s): %s" % (sig.name, p.returncode, err.strip()[-200:]),
          p.returncode == -sig)
    check("CLI %s: says it was interrupted" % sig.name, "interrupted" in err)
    check("CLI %s: no output, no temporaries: %s" % (sig.name, os.listdir(out_dir)),
          not os.path.exists(out) and not leftovers(out_dir))

# One file (O_TMPFILE): nothing visible at any time; SIGINT leaves nothing.
out = os.path.join(out_dir, "one.safetensors")
p = subprocess.Popen([cli, "dequant", big, out, "--dtype", "f32"], stderr=subprocess.PIPE,
                     text=True, env=env)
time.sleep(0.3)
p.send_signal(signal.SIGINT)
_, err = p.communicate(timeout=60)
check("CLI SIGINT, one file: rc %s, nothing left %s" % (p.returncode, os.listdir(out_dir)),
      p.returncode in (-signal.SIGINT, 0) and not leftovers(out_dir) and
      (p.returncode == 0) == os.path.exists(out))
if os.path.exists(out):
    os.remove(out)

# SIGKILL leaves the temporary folder; the next run into the same output
# removes it, says so, and succeeds. A temporary of a live process (this
# one's pid) is never touched.
out = os.path.join(out_dir, "killed")
foreign = os.path.join(out_dir, "killed.nibble-tmp-%s-%d-ABCdef" % (host_tag(), os.getpid()))
os.makedirs(foreign)
other_host = os.path.join(out_dir, "killed.nibble-tmp-elsewhere-1-ABCdef")
os.makedirs(other_host)
p = start_and_wait_for_temporary([cli, "dequant", big, out, "--dtype", "f32"], out)
time.sleep(0.05)
p.kill()
p.communicate(timeout=60)
left = leftovers(out_dir)
check("SIGKILL leaves its temporary folder: %s" % left, len(left) == 3)
r = subprocess.run([cli, "dequant", big, out, "--quiet"], capture_output=True, text=True,
                   env=env, timeout=120)
check("the next run succeeds (%d: %s)" % (r.returncode, r.stderr[-300:]), r.returncode == 0)
check("... and says it removed the killed run's temporary: " + r.stderr.strip()[-300:],
      "note: removed" in r.stderr and "left by an earlier nibble run that was killed" in r.stderr)
check("... and left the live process's and the other host's temporaries alone: %s"
      % leftovers(out_dir), leftovers(out_dir) == sorted([os.path.basename(foreign),
                                                           os.path.basename(other_host)]))
shutil.rmtree(foreign)
shutil.rmtree(other_host)
shutil.rmtree(out, ignore_errors=True)

# --- 3. Python: Ctrl-C stops dequant (with and without a callback) ----------
child = os.path.join(work, "child.py")
with open(child, "w") as f:
    f.write("import sys, nibble, os\n"
            "cb = (lambda *a: None) if sys.argv[3] == 'cb' else None\n"
            "try:\n"
            "    nibble.dequant(sys.argv[1], sys.argv[2], dtype='f32', progress=cb)\n"
            "    print('finished')\n"
            "except KeyboardInterrupt:\n"
            "    print('KeyboardInterrupt')\n")
for mode in ("plain", "cb"):
    out = os.path.join(out_dir, "py_" + mode)
    p = subprocess.Popen([py, child, big, out, mode], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    base = os.path.basename(out) + ".nibble-tmp-"
    t0 = time.time()
    while time.time() - t0 < 30 and p.poll() is None and \
            not any(e.startswith(base) for e in os.listdir(out_dir)):
        time.sleep(0.002)
    time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    o, e = p.communicate(timeout=60)
    check("Python Ctrl-C (%s): KeyboardInterrupt raised in dequant: %r %r" % (mode, o, e[-300:]),
          o.strip() == "KeyboardInterrupt")
    check("Python Ctrl-C (%s): nothing published, no temporaries: %s" % (mode, os.listdir(out_dir)),
          not os.path.exists(out) and not leftovers(out_dir))

# --- 3b. Python: Ctrl-C stops reading one large tensor into memory ---------
# SIGINT a tenth of the way into a call that writes 256 MiB of float32: the
# call asks between pieces of 16 MiB and raises KeyboardInterrupt long before
# it would have finished (interrupt_util says how it is judged).
def ctrl_c_stops_check(label, fn, stopped_early=None, before=None):
    ok, note = ctrl_c_stops(fn, stopped_early, before)
    check("Python Ctrl-C stops %s (%s)" % (label, note), ok)


rng = np.random.default_rng(5)
big_codes = rng.integers(-32768, 32767, size=(8192, 2048), dtype=np.int16)  # int4 x 4
big_scale = rng.random((32768, 16), dtype=np.float32) + 0.5
big_d = nibble.Dequantizer.pmx(big_codes, big_scale, group_size=128)
big_out = np.empty((32768, 2048), dtype=np.float32)


def mark_last_piece():
    big_out[-1, :] = np.nan  # the last piece: written only by a run that did not stop


ctrl_c_stops_check("Dequantizer.run, 32768 x 2048 int4 -> float32",
                   lambda: big_d.run(threads=1, out=big_out),
                   stopped_early=lambda: bool(np.isnan(big_out[-1, :]).all()),
                   before=mark_last_piece)
del big_d, big_codes, big_scale, big_out

emb_path = os.path.join(work, "emb_f16.safetensors")
write_st(emb_path, {"emb": ("F16", rng.standard_normal((8192, 8192)).astype(np.float16))})
emb = nibble.open(emb_path)
ctrl_c_stops_check("get_tensor, float16 8192 x 8192 -> float32",
                   lambda: emb.get_tensor("emb", dtype="float32"))
del emb
os.remove(emb_path)

# --- 4. Two threads writing one output folder ------------------------------
out = os.path.join(out_dir, "shared")
results = []


def convert():
    try:
        nibble.dequant(big, out, dtype="f16")
        results.append("ok")
    except ValueError as e:
        results.append(str(e))


threads = [threading.Thread(target=convert) for _ in range(2)]
for th in threads:
    th.start()
for th in threads:
    th.join()
check("two writers of one folder: one succeeds, one fails clearly: %s" % results,
      results.count("ok") == 1 and any(r != "ok" and "Success" not in r and out in r
                                       for r in results))
check("two writers: a complete folder and no temporaries: %s" % os.listdir(out_dir),
      os.path.exists(os.path.join(out, "model.safetensors")) and not leftovers(out_dir))
shutil.rmtree(out)

# --- 5. Output paths checked before any work ------------------------------
afile = os.path.join(out_dir, "afile")
with open(afile, "w") as f:
    f.write("x")
gguf = os.path.join(ck_dir, "llama_tiny.gguf")
t0 = time.time()
r = subprocess.run([cli, "dequant", gguf, afile + "/", "--hf"], capture_output=True, text=True)
check("--hf into 'afile/' (a file): refused at once: %s" % r.stderr.strip(),
      r.returncode == 1 and "exists and is a regular file, not a folder" in r.stderr and
      open(afile).read() == "x" and not leftovers(out_dir))
raises("Python: a NUL byte in a folder output", ValueError,
       lambda: nibble.dequant(gguf, os.path.join(out_dir, "hf\0x"), hf=True), "NUL byte")
check("... and nothing named 'hf' was written", not os.path.exists(os.path.join(out_dir, "hf")))
raises("Python: a NUL byte in a file output", ValueError,
       lambda: nibble.dequant(gguf, os.path.join(out_dir, "a\0.safetensors")), "NUL byte")

# --- 6. bench --out: the same checks as every output, before the runs ----
bench = [cli, "bench", "--shape", "64,256", "--reps", "1", "--layout", "pmx-q1",
         "--group-sizes", "128", "--dtype", "f32", "--threads", "1", "--no-in-cache"]
os.mkfifo(os.path.join(out_dir, "fifo.json"))
os.symlink("elsewhere", os.path.join(out_dir, "link.json"))
os.makedirs(os.path.join(out_dir, "sub"))
for name, out, rc, needle in (
        ("a character device", "/dev/null", 1, "names a folder or a special file"),
        ("a FIFO at OUT.json", os.path.join(out_dir, "fifo"), 1, "is a FIFO"),
        ("a symlink at OUT.json", os.path.join(out_dir, "link"), 1, "symbolic link"),
        ("a folder", os.path.join(out_dir, "sub") + "/", 1, "names a folder"),
        ("an empty name", "", 2, "a name prefix is needed"),
        ("an unwritable place", "/proc/nibble-x", 1, "cannot create")):
    t0 = time.time()
    r = subprocess.run(bench + ["--out", out], capture_output=True, text=True)
    check("bench --out %s: exit %d (%s) before any run" % (name, r.returncode, r.stderr.strip()),
          r.returncode == rc and needle in r.stderr and "pmx-q1" not in r.stdout)
check("bench --out: nothing written beside them: %s" % sorted(os.listdir(out_dir)),
      sorted(os.listdir(out_dir)) == ["afile", "fifo.json", "link.json", "sub"])
check("/dev/null.json was not created", not os.path.exists("/dev/null.json"))
r = subprocess.run([os.path.abspath(cli), "bench", "--weights", ".", "--out", "tokenizer",
                    "--reps", "1"], capture_output=True, text=True,
                   cwd=os.path.join(ck_dir, "gptq"))
check("bench --out relative, inside the studied checkpoint: refused (%s)" % r.stderr.strip(),
      r.returncode == 1 and "into the checkpoint studied" in r.stderr and
      not os.path.exists(os.path.join(ck_dir, "gptq", "tokenizer.json")))

# --- 7. Paths as bytes / os.PathLike; names that are not UTF-8 -------------
with nibble.open(os.fsencode(gguf)) as f:
    check("nibble.open(bytes)", len(f.keys()) > 0)
with nibble.open(pathlib.Path(gguf)) as f:
    check("nibble.open(pathlib.Path)", len(f.keys()) > 0)
raises("nibble.open of a missing bytes path names it", ValueError,
       lambda: nibble.open(b"/nonexistent/model.gguf"), "'/nonexistent/model.gguf'")


def gguf_string(b):
    return struct.pack("<Q", len(b)) + b


bad = b"blk.\xff\xfe.weight"
meta = gguf_string(b"general.\xfftitle") + struct.pack("<I", 8) + gguf_string(b"caf\xe9")
head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + meta + gguf_string(bad) + \
    struct.pack("<IQIQ", 1, 4, 0, 0)
head += b"\0" * ((32 - len(head) % 32) % 32)
odd = os.path.join(work, "odd.gguf")
with open(odd, "wb") as f:
    f.write(head + struct.pack("<4f", 1, 2, 3, 4))
with nibble.open(odd) as f:
    keys = f.keys()
    check("non-UTF-8 tensor name: listed with surrogateescape %r" % keys,
          keys == [bad.decode("utf-8", "surrogateescape")])
    check("... and read back by that name",
          f.get_tensor(keys[0]).tolist() == [1.0, 2.0, 3.0, 4.0])
    check("... and by its bytes", f.get_tensor(bad).tolist() == [1.0, 2.0, 3.0, 4.0])
    md = f.metadata()
    check("non-UTF-8 metadata key and value: metadata() works %r" % md,
          md.get(b"general.\xfftitle".decode("utf-8", "surrogateescape")) is not None)
    raises("a missing name is a KeyError", KeyError, lambda: f.get_tensor("nope"), "nope")

# --- 8. fold: external data by name; the model's own name refused --------
src = os.path.join(fold_dir, "qdq_int4.onnx")
out = os.path.join(out_dir, "f.onnx")
rep = nibble.fold(src, out, external_data="f.weights")
check("nibble.fold(external_data=name) writes external data: %s" % rep,
      rep["external"] and os.path.exists(os.path.join(out_dir, "f.weights")))
r = subprocess.run([cli, "fold", src, os.path.join(out_dir, "g.onnx"), "--external-data=g.onnx"],
                   capture_output=True, text=True)
check("fold --external-data=<the model's own name> refused: " + r.stderr.strip(),
      r.returncode == 1 and "the model's own file name" in r.stderr and
      not os.path.exists(os.path.join(out_dir, "g.onnx")))
raises("nibble.fold(external_data=<the model's own name>)", ValueError,
       lambda: nibble.fold(src, os.path.join(out_dir, "h.onnx"), external_data="h.onnx"),
       "own file name")

print("hardening: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
