#!/usr/bin/python3
"""A/B of nibble builds on a shared machine: the binaries' `nibble bench`
runs alternate, round by round, so both see the same load.

Usage: ab_binaries.py BIN_A,BIN_B[,...] ROUNDS OUT.jsonl BENCH_ARGS...
Every row goes to OUT.jsonl (with `binary` and `round`); printed: the
median G el/s per (layout, dtype, threads) and binary, and the median
ratio_rw where the bench gave one (n: how many rounds did).
"""
import json, subprocess, sys, statistics, collections
bins = sys.argv[1].split(',')
rounds = int(sys.argv[2]); save = open(sys.argv[3], 'w'); args = sys.argv[4:]
res = collections.defaultdict(lambda: collections.defaultdict(list))
rw = collections.defaultdict(lambda: collections.defaultdict(list))
for r in range(rounds):
    for b in bins:
        out = subprocess.run([b, 'bench', '--format', 'json'] + args, capture_output=True, text=True).stdout
        for row in json.loads(out):
            row['binary'] = b.split('/')[-1]; row['round'] = r; save.write(json.dumps(row) + '\n'); save.flush()
            k = (row['layout'], row['dtype'], row['threads'])
            res[k][b].append(row['gelems_per_s'])
            if row.get('ratio_rw') is not None: rw[k][b].append(row['ratio_rw'])
for k in sorted(res):
    line = '%-14s %-4s %2d ' % k
    for b in bins:
        g = res[k][b]; q = rw[k][b]
        line += ' | %-12s %6.2f Gel/s' % (b.split('/')[-1], statistics.median(g))
        if q: line += ' rw %.2f (n=%d)' % (statistics.median(q), len(q))
    print(line)
