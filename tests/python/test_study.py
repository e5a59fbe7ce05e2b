"""nibble.study on a real `nibble bench --out` result: the rows load, the
picture is written (a PNG of the expected size), bad input is refused.
Exit 77 (skipped) without matplotlib. Usage: test_study.py RESULT.json OUT.png
"""
import json
import os
import struct
import subprocess
import sys

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("SKIP: matplotlib is not importable (Debian: python3-matplotlib)")
    sys.exit(77)

from nibble import study

result, png = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, cond):
    global passed, failed
    passed, failed = (passed + 1, failed) if cond else (passed, failed + 1)
    if not cond:
        print("FAIL " + name)


rows = study.load_rows(result)
check("rows", len(rows) > 0 and {r["layout"] for r in rows} >= {"pmx-q1", "gptq", "q4_k"})
check("per-channel rows", any(r["group_size"] == 0 for r in rows))
check("numbers are numbers", all(isinstance(r["ratio_stream"], (int, float, type(None))) and
                                 isinstance(r["out_gbps"], (int, float)) and
                                 isinstance(r["group_size"], int) for r in rows))
check("yardstick fields", all(r["stream_gbps_min"] <= r["stream_gbps"] <= r["stream_gbps_max"] and
                              (abs(r["yardstick_spread"] - 0.10) < 1e-3 or
                               (r["ratio_stream"] is None) == (r["yardstick_spread"] > 0.10))
                              for r in rows))
r = subprocess.run([sys.executable, "-m", "nibble.study", result, "-o", png],
                   capture_output=True, text=True)
check("exit 0: " + r.stderr, r.returncode == 0)
with open(png, "rb") as f:
    head = f.read(24)
check("PNG", head[:8] == b"\x89PNG\r\n\x1a\n")
w, h = struct.unpack(">II", head[16:24])
check("picture size %dx%d" % (w, h), w > 800 and h > 600)
# Bad inputs: a clear message, exit 1, no traceback.
bad = os.path.join(os.path.dirname(os.path.abspath(png)), "not_a_result.json")
with open(bad, "w") as f:
    json.dump({"rows": [{"layout": "x"}]}, f)
for args, needle in (([bad], "lacks"), (["/nonexistent.json"], "No such file"),
                     ([result, "--threads", "7"], "no rows at threads=7")):
    r = subprocess.run([sys.executable, "-m", "nibble.study", *args, "-o", png + ".bad.png"],
                       capture_output=True, text=True)
    check("refused %s: %s" % (args, r.stderr.strip()),
          r.returncode == 1 and needle in r.stderr and "Traceback" not in r.stderr)
print("study: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
