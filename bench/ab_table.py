#!/usr/bin/env python3
"""An A/B of two builds from bench/multicore_sweep.sh's "ab" step.

    python3 bench/ab_table.py AB-BASE.csv AB-NEW.csv

Each file holds `nibble bench --format csv` rows, each line prefixed with
its round (the two builds alternate, round by round). One markdown row per
layout x output type x thread count:

  G el/s base / new   the median over the rounds (and the range)
  new / base          the ratio of the medians
  prep % base / new   the median share of the timed path spent preparing
                      (prepare_seconds / seconds)
  x r+w base / new    the median ratio to the read + write stream, over the
                      rounds whose yardstick was steady ("—": none was)

Standard library only.
"""
import csv
import statistics
import sys
from collections import defaultdict


def load(path):
    """{(layout, dtype, threads): [row, ...]} over the rounds."""
    rows = defaultdict(list)
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = None
        for fields in reader:
            if len(fields) < 3:
                continue
            if fields[1] == "layout":
                header = ["round"] + fields[1:]
                continue
            if header is None:
                continue
            r = dict(zip(header, fields))
            rows[(r["layout"], r["dtype"], int(r["threads"]))].append(r)
    return rows


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def num(r, key):
    v = r.get(key, "")
    return float(v) if v not in ("", None) else None


def cell(v, fmt):
    return "—" if v is None else format(v, fmt)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    base, new = load(argv[1]), load(argv[2])
    print("| layout | out | threads | rounds | G el/s base | G el/s new | new / base "
          "| prep % base | prep % new | x r+w base | x r+w new |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(set(base) & set(new), key=lambda k: (k[0], k[1], k[2])):
        b, n = base[key], new[key]
        gb = [num(r, "gelems_per_s") for r in b]
        gn = [num(r, "gelems_per_s") for r in n]
        pb = [100 * num(r, "prepare_seconds") / num(r, "seconds") for r in b]
        pn = [100 * num(r, "prepare_seconds") / num(r, "seconds") for r in n]
        mb, mn = med(gb), med(gn)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {min(len(b), len(n))} "
              f"| {mb:.1f} ({min(gb):.1f}–{max(gb):.1f}) | {mn:.1f} ({min(gn):.1f}–{max(gn):.1f}) "
              f"| {mn / mb:.2f} | {med(pb):.1f} | {med(pn):.1f} "
              f"| {cell(med([num(r, 'ratio_rw') for r in b]), '.2f')} "
              f"| {cell(med([num(r, 'ratio_rw') for r in n]), '.2f')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
