#!/usr/bin/env python3
"""The README's speed tables from `nibble bench --out` JSON files.

    python3 bench/sweep_table.py [--threads 1,16] SWEEP.json [SWEEP.json ...]

One markdown row per layout x output type, over every sweep given (ranges
are min-max across the sweeps; a sweep whose fill spread exceeded +-10 %
for a row has no ratio there and is left out of that range, "(k/n)" says
how many of the n sweeps gave one). For the lowest and highest thread
count asked for (default: those in the files):

  x fill      the kernel's output GB/s over the streaming fill's
  fill +-%    the fill's spread in each sweep (half its 10th-90th
              percentile range over its median, in %): over 10 the
              sweep gives no ratio
  x r+w       ... over the read + write stream's (the layout's input read
              while its output is streamed: what memory allows)
  r+w / fill  the read + write stream over the fill (what the reads cost)
  G el/s      the kernel's rate
  in cache    the LAYOUT-tile rows: G el/s at the lowest and the highest
              thread count, the scaling between them and memcpy's (in
              cache, same threads) over the same step

With --compact, instead: one row per layout, x r+w for each output type at
the lowest and the highest thread count, the best of the sweeps given
(the documentation's per-entry table), and how many entries meet the
target (0.85; 0.7 for act-order).

With --limits, instead: what limits each entry, one row per layout x
output type x thread count, from the same sweep's own figures (the first
file's rows):

  x r+w       as above (its median run)
  limit       the read + write stream's rate in G el/s: output elements per
              second at x r+w = 1
  in cache    the LAYOUT-tile row's G el/s at that thread count: the kernel's
              own rate with no memory traffic (plain stores into L2)
  cache/limit the two over each other: below 0.85, the kernel cannot reach
              0.85 of the limit even if its memory traffic cost no time
  overlap     where x r+w < 0.85: how much of the shorter of the two times
              (per element: 1 / in cache, 1 / limit) is hidden behind the
              longer in the measured time, 1 = fully, 0 = they add up
  verdict     met (x r+w >= 0.85); compute (cache/limit < 0.85: a faster
              kernel is the only way); overlap (the kernel is fast enough in
              cache but its run from memory is not: the decode and the
              memory streams get in each other's way)

Standard library only.
"""
import argparse
import json
import sys
from collections import defaultdict


def fmt_range(values, digits=2):
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    a, b = f"{lo:.{digits}f}", f"{hi:.{digits}f}"
    return a if a == b else f"{a}–{b}"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", help="two thread counts: low,high (default: from the files)")
    ap.add_argument("--compact", action="store_true",
                    help="x r+w only, one row per layout (see the module's doc)")
    ap.add_argument("--limits", action="store_true",
                    help="what limits each entry (see the module's doc)")
    ap.add_argument("sweeps", nargs="+")
    args = ap.parse_args(argv)

    whole = defaultdict(lambda: defaultdict(list))  # (layout, dtype) -> threads -> rows
    tile = defaultdict(lambda: defaultdict(list))
    order = []
    for path in args.sweeps:
        try:
            with open(path) as f:
                rows = json.load(f)
            for r in rows:
                is_tile = r["layout"].endswith("-tile")
                layout = r["layout"][: -len("-tile")] if is_tile else r["layout"]
                key = (layout, r["dtype"])
                for field in ("ratio_stream", "ratio_rw", "rw_gbps", "stream_gbps",
                              "yardstick_spread", "gelems_per_s", "memcpy_gbps"):
                    r[field]  # every field the table reads
                if key not in order:
                    order.append(key)
                (tile if is_tile else whole)[key][r["threads"]].append(r)
        except OSError as e:
            sys.exit(f"sweep_table: {path}: {e.strerror}")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            sys.exit(f"sweep_table: {path}: not the JSON of `nibble bench --out` ({e!r})")
    if args.limits:
        return limits(order, whole, tile)
    counts = sorted({t for d in whole.values() for t in d})
    if args.threads:
        try:
            lo, hi = (int(x) for x in args.threads.split(","))
        except ValueError:
            sys.exit(f"sweep_table: --threads wants two counts, low,high (got {args.threads!r})")
    elif counts:
        lo, hi = counts[0], counts[-1]
    else:
        sys.exit("sweep_table: no whole-path rows in the files")
    if args.compact:
        return compact(order, whole, (lo, hi) if hi != lo else (lo,), len(args.sweeps))

    def cells(rows):
        ratios = [r["ratio_stream"] for r in rows]
        ok = sum(v is not None for v in ratios)
        fill_ratio = fmt_range(ratios)
        if rows:
            fill_ratio += f" ({ok}/{len(rows)})"
        return [
            fill_ratio,
            fmt_range([100 * r["yardstick_spread"] for r in rows], 0),
            fmt_range([r["ratio_rw"] for r in rows]),
            fmt_range([r["rw_gbps"] / r["stream_gbps"] for r in rows if r["stream_gbps"] > 0]),
            fmt_range([r["stream_gbps"] for r in rows], 0),
            fmt_range([r["gelems_per_s"] for r in rows], 1),
        ]

    head = ["layout", "out"]
    names = ["× fill (runs)", "fill ±%", "× r+w", "r+w / fill", "fill GB/s", "G el/s"]
    for t in (lo, hi) if hi != lo else (lo,):
        head += [f"{t} thr: {n}" for n in names]
    head.append(f"in cache G el/s, {lo} → {hi} thr (scaling; memcpy's)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in order:
        if key not in whole:
            continue
        row = list(key)
        for t in (lo, hi) if hi != lo else (lo,):
            row += cells(whole[key].get(t, []))
        a, b = tile[key].get(lo, []), tile[key].get(hi, [])
        if a and b:
            ga = [r["gelems_per_s"] for r in a]
            gb = [r["gelems_per_s"] for r in b]
            ks = [y / x for x, y in zip(ga, gb)]
            ms = [y["memcpy_gbps"] / x["memcpy_gbps"] for x, y in zip(a, b)]
            row.append(f"{fmt_range(ga, 1)} → {fmt_range(gb, 1)} ({fmt_range(ks, 1)}×; {fmt_range(ms, 1)}×)")
        elif a:
            row.append(fmt_range([r["gelems_per_s"] for r in a], 1))
        else:
            row.append("—")
        print("| " + " | ".join(row) + " |")


OUT_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
TARGET = 0.85


ACT_ORDER = ("gptq-act", "ct-act")


def compact(order, whole, threads, sweeps):
    layouts = list(dict.fromkeys(layout for layout, _ in order if (layout, _) in whole))
    dtypes = [d for d in OUT_BYTES if any((layout, d) in whole for layout in layouts)]
    head = ["layout"] + [f"{t} thr: {d}" for t in threads for d in dtypes]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    met = defaultdict(int)
    for layout in layouts:
        row = [layout]
        target = 0.7 if layout in ACT_ORDER else TARGET
        for t in threads:
            for d in dtypes:
                ratios = [r["ratio_rw"] for r in whole.get((layout, d), {}).get(t, [])
                          if r["ratio_rw"] is not None]
                best = max(ratios) if ratios else None
                row.append("—" if best is None else f"{best:.2f}")
                met[t, d] += best is not None and best >= target
        print("| " + " | ".join(row) + " |")
    print()
    per = "; ".join(f"{t} thread{'s' if t > 1 else ''} "
                    + " / ".join(str(met[t, d]) for d in dtypes) for t in threads)
    print(f"Best of {sweeps} sweep{'s' if sweeps > 1 else ''}, × r+w: entries met of "
          f"{len(layouts)}, {' / '.join(dtypes)}: {per} (target 0.85; "
          f"0.7 for {', '.join(ACT_ORDER)}).")


def limits(order, whole, tile):
    print("| layout | out | threads | × r+w | limit G el/s | in cache G el/s | cache/limit "
          "| overlap | verdict |")
    print("|" + "---|" * 9)
    for key in order:
        for t in sorted(whole.get(key, {})):
            r = whole[key][t][0]
            tiles = tile.get(key, {}).get(t, [])
            ratio = r["ratio_rw"]
            limit = r["rw_gbps"] / OUT_BYTES[r["dtype"]]  # output GB/s -> G el/s
            cache = tiles[0]["gelems_per_s"] if tiles else None
            row = [key[0], key[1], str(t), "—" if ratio is None else f"{ratio:.2f}",
                   f"{limit:.1f}", "—" if cache is None else f"{cache:.1f}"]
            if cache is None or ratio is None or limit <= 0:
                row += ["—", "—", "—"]
            else:
                row.append(f"{cache / limit:.2f}")
                if ratio >= TARGET:
                    row += ["", "met"]
                else:
                    # Per element: tc = 1 / cache, tm = 1 / limit, measured
                    # t = 1 / (ratio * limit) = max + (1 - overlap) * min.
                    tc, tm, tt = 1 / cache, 1 / limit, 1 / (ratio * limit)
                    hidden = 1 - (tt - max(tc, tm)) / min(tc, tm)
                    row.append(f"{min(1.0, max(0.0, hidden)):.2f}")
                    row.append("compute" if cache / limit < TARGET else "overlap")
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
