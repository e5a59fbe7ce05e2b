"""An interrupted sharded conversion resumes: `nibble dequant` into a model
folder is stopped (SIGINT, then SIGKILL) after it completed some output
shards; the same command again keeps those shards (says so) and writes the
rest, and the folder equals an uninterrupted run's byte for byte. Another
job into the same OUT does not adopt the leftovers: it removes them.
Usage: test_resume.py NIBBLE_CLI WORK_DIR
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not importable by " + sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_util import write_st  # noqa: E402

cli, work = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, cond):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name)


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
rng = np.random.default_rng(5)
src = os.path.join(work, "fp8")
os.makedirs(src)
N, K, LAYERS = 512, 2048, 24
tensors = {}
for layer in range(LAYERS):
    p = "model.layers.%d.mlp.up_proj." % layer
    codes = rng.integers(0, 0x7E, size=(N, K), dtype=np.uint8)
    tensors[p + "weight"] = ("F8_E4M3", codes)
    tensors[p + "weight_scale_inv"] = ("F32", rng.random((N // 128, K // 128)).astype(np.float32))
write_st(os.path.join(src, "model.safetensors"), tensors)
with open(os.path.join(src, "config.json"), "w") as f:
    f.write('{"model_type": "llama", "quantization_config": {"quant_method": "fp8", '
            '"weight_block_size": [128, 128]}}')
args = ["--dtype", "bf16", "--max-shard-size", "2200000", "--threads", "1"]


def run(out, extra=()):
    return subprocess.run([cli, "dequant", src, out] + args + list(extra),
                          capture_output=True, text=True)


def files(d):
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


reference = os.path.join(work, "reference")
r = run(reference)
check("uninterrupted run: exit 0 (%s)" % r.stderr.strip(), r.returncode == 0)
want = files(reference) if r.returncode == 0 else {}
shards = [n for n in want if n.endswith(".safetensors")]
check("the job has many shards (%d)" % len(shards), len(shards) >= 10)


def interrupt(out, sig):
    """Starts the conversion and sends `sig` once its manifest lists a
    shard; returns (exit code, stderr, kept temporaries) or None when the
    run finished first."""
    p = subprocess.Popen([cli, "dequant", src, out] + args, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    sent = False
    while p.poll() is None and time.time() < deadline:
        if glob.glob(out + ".nibble-tmp-*/nibble-resume.json"):
            p.send_signal(sig)
            sent = True
            break
        time.sleep(0.001)
    err = p.communicate()[1]
    if not sent:
        return None
    return p.returncode, err, glob.glob(out + ".nibble-tmp-*")


for sig, name in [(signal.SIGINT, "SIGINT"), (signal.SIGKILL, "SIGKILL")]:
    out = os.path.join(work, "out-" + name)
    got = None
    for attempt in range(10):
        shutil.rmtree(out, ignore_errors=True)
        for t in glob.glob(out + ".nibble-tmp-*"):
            shutil.rmtree(t)
        got = interrupt(out, sig)
        if got is not None and got[0] != 0:
            break
    check(name + ": the run was interrupted after a shard", got is not None and got[0] != 0)
    if got is None:
        continue
    rc, err, kept = got
    check(name + ": OUT not published", not os.path.exists(out))
    check(name + ": one temporary folder kept (%s)" % kept, len(kept) == 1)
    if sig == signal.SIGINT:
        check(name + ": the message says how to resume (%s)" % err.strip(),
              "run the same command again to resume" in err)
    r = run(out)
    check(name + ": resumed run exit 0 (%s)" % r.stderr.strip(), r.returncode == 0)
    check(name + ": it says it resumed (%s)" % r.stderr.strip(), "resumed the interrupted run" in
          r.stderr and "shards were complete and kept" in r.stderr)
    check(name + ": no temporaries left", not glob.glob(out + ".nibble-tmp-*"))
    if r.returncode == 0:
        got_files = files(out)
        check(name + ": the same files as an uninterrupted run (%s)" % sorted(got_files),
              sorted(got_files) == sorted(want))
        check(name + ": byte for byte", all(got_files.get(k) == v for k, v in want.items()))

# Another job (other --dtype) into the same OUT: the leftovers are removed,
# never adopted.
out = os.path.join(work, "out-other-job")
got = None
for attempt in range(10):
    shutil.rmtree(out, ignore_errors=True)
    got = interrupt(out, signal.SIGINT)
    if got is not None and got[0] != 0:
        break
if got is not None:
    r = subprocess.run([cli, "dequant", src, out, "--dtype", "f32", "--max-shard-size", "2200000"],
                       capture_output=True, text=True)
    check("other job: exit 0 (%s)" % r.stderr.strip(), r.returncode == 0)
    check("other job: did not resume", "resumed" not in r.stderr)
    check("other job: removed the leftovers (%s)" % r.stderr.strip(),
          "left by an earlier nibble run" in r.stderr)
    check("other job: no temporaries left", not glob.glob(out + ".nibble-tmp-*"))
    if r.returncode == 0:
        import json
        with open(os.path.join(out, "config.json")) as f:
            check("other job: its own dtype", json.load(f).get("torch_dtype") == "float32")

print("resume: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
