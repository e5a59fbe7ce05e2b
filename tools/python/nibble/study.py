"""Draw a group-size study: ``python3 -m nibble.study RESULT.json -o study.png``.

RESULT.json is what ``nibble bench --out RESULT`` (or ``--format json``)
writes: one row per layout x group size x output type x thread count, with
the speed (out_gbps, ratio_stream: the ratio to this machine's streaming
fill bandwidth measured in the same run) and the error of quantizing the
weight at that group size (rmse, sqnr_db, max_abs_err).

The picture has four panels against group size (per-channel drawn at the
right end): output GB/s and the ratio to the job's memory limit (reading
the layout's stored bytes and writing the output, measured in the same
run: ratio_rw) with one line per layout/dtype/thread count (marker: circle
for one thread, square for the most), then RMSE and SQNR (max error as
dotted lines on the RMSE panel), which do not depend on threads. A ratio
whose yardstick was too unsteady (null in the JSON) or above 1.25 (the
yardstick disturbed by other work: no kernel beats the memory limit by
that much) is not drawn. Layouts whose format fixes the block size (the
GGUF types, NF4, FP8, MXFP4) are single points. Needs matplotlib (Debian:
python3-matplotlib).
"""
import argparse
import json
import math
import sys


def load_rows(path):
    with open(path) as f:
        data = json.load(f)
    rows = data["rows"] if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: not a nibble bench result (a list of rows)")
    need = {"layout", "group_size", "dtype", "threads", "out_gbps"}
    for r in rows:
        missing = need - set(r)
        if missing:
            raise ValueError(f"{path}: a row lacks {sorted(missing)}")
    # In-cache tile rows have no accuracy and another yardstick.
    return [r for r in rows if not str(r.get("note", "")).startswith("in-cache")]


def series(rows, threads):
    """{(layout, dtype, threads): sorted [(x, row)]} at the thread counts
    `threads`; x is the group size, per-channel (0) placed after the
    largest."""
    rows = [r for r in rows if r["threads"] in threads]
    largest = max([r["group_size"] for r in rows if r["group_size"] > 0] or [128])
    per_channel_x = largest * 2
    out = {}
    for r in rows:
        x = r["group_size"] if r["group_size"] > 0 else per_channel_x
        out.setdefault((r["layout"], r["dtype"], r["threads"]), []).append((x, r))
    for v in out.values():
        v.sort(key=lambda p: p[0])
    return out, per_channel_x


MAX_DRAWN_RATIO = 1.25


def draw(rows, output, threads=None, title=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = sorted({r["threads"] for r in rows})
    if not counts:
        raise ValueError("no rows to draw")
    if threads is None:
        threads = counts
    elif threads not in counts:
        raise ValueError(f"no rows at threads={threads} (have {counts})")
    else:
        threads = [threads]
    data, pc_x = series(rows, threads)
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    panels = [(axes[0][0], "out_gbps", "output GB/s", False),
              (axes[0][1], "ratio_rw", "ratio to reading + writing its bytes (1.0 = memory "
               "limit)", False),
              (axes[1][0], "rmse", "RMSE of the quantized weight (dotted: max error)", True),
              (axes[1][1], "sqnr_db", "SQNR dB (higher is better)", False)]
    accuracy_keys = {"rmse", "sqnr_db"}
    styles = {"f32": "-", "f16": "--", "bf16": "-."}
    markers = {t: ("o" if i == 0 else "s" if i == len(threads) - 1 else "^")
               for i, t in enumerate(threads)}
    cmap = plt.get_cmap("tab10")
    layouts = sorted({k[0] for k in data})
    color = {l: cmap(i % 10) for i, l in enumerate(layouts)}
    xs_all = sorted({x for v in data.values() for x, _ in v})
    for ax, key, label, log in panels:
        for (layout, dtype, thr), pts in sorted(data.items()):
            if key in accuracy_keys and thr != threads[0]:
                continue  # the same error at every thread count
            xy = [(x, r[key]) for x, r in pts if r.get(key) is not None
                  and not (isinstance(r[key], float) and math.isnan(r[key]))
                  and not (key == "ratio_rw" and r[key] > MAX_DRAWN_RATIO)]
            if not xy:
                continue
            xv, yv = zip(*xy)
            name = f"{layout} {dtype}" if key in accuracy_keys else f"{layout} {dtype} {thr}t"
            ax.plot(xv, yv, styles.get(dtype, ":"), marker=markers[thr], color=color[layout],
                    label=name)
            if key == "rmse":
                xy2 = [(x, r["max_abs_err"]) for x, r in pts if r.get("max_abs_err") is not None]
                if xy2:
                    ax.plot(*zip(*xy2), ":", color=color[layout], alpha=0.6)
        if key == "ratio_rw":
            ax.axhline(1.0, color="gray", lw=0.8)
            ax.axhline(0.85, color="gray", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs_all)
        ax.set_xticklabels(["per-chan" if x == pc_x else str(x) for x in xs_all])
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("group size")
        ax.set_title(label, fontsize=10)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8,
               title="layout dtype\n(f32 solid, f16 dashed,\nbf16 dash-dot)", title_fontsize=8)
    thr_text = ", ".join(str(t) for t in threads)
    fig.suptitle(title or f"nibble group-size study (threads: {thr_text})")
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    fig.savefig(output, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m nibble.study", description=__doc__.splitlines()[0])
    ap.add_argument("result", help="RESULT.json from `nibble bench --out RESULT`")
    ap.add_argument("-o", "--output", default="study.png", help="picture to write (.png, .svg, .pdf)")
    ap.add_argument("--threads", type=int, help="one thread count to draw (default: all)")
    ap.add_argument("--title")
    args = ap.parse_args(argv)
    try:
        rows = load_rows(args.result)
        draw(rows, args.output, args.threads, args.title)
    except (OSError, ValueError, KeyError) as e:
        print(f"nibble.study: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"nibble.study: {e} (install python3-matplotlib)", file=sys.stderr)
        return 1
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
