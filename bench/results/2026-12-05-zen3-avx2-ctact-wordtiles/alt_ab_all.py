#!/usr/bin/python3
"""Alternated A/B of two nibble builds keeping both kinds of bench rows:
whole tensors (from memory) and the in-cache '-tile' rows. The order of
the two binaries is swapped every round; per (layout, dtype, threads)
printed: each binary's median x r+w (whole tensors) and the median and
range of the per-round ratios B / A of G el/s.

    alt_ab_all.py BIN_A BIN_B ROUNDS OUT.jsonl BENCH_ARGS...
"""
import collections, json, statistics, subprocess, sys
A, B, rounds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
args = sys.argv[5:]
rw = collections.defaultdict(list)
ratio = collections.defaultdict(list)
with open(out, 'w') as f:
    for r in range(rounds):
        got = {}
        for b in ([A, B] if r % 2 == 0 else [B, A]):
            text = subprocess.run([b, 'bench', '--format', 'json'] + args,
                                  capture_output=True, text=True).stdout
            rows = json.loads(text)
            got[b] = {(x['layout'], x['dtype'], x['threads']): x for x in rows}
            for x in rows:
                x['binary'], x['round'] = b, r
                f.write(json.dumps(x) + '\n')
        for k, x in got[A].items():
            y = got[B].get(k)
            if y is None:
                continue
            ratio[k].append(y['gelems_per_s'] / x['gelems_per_s'])
            for b, z in ((A, x), (B, y)):
                if isinstance(z.get('ratio_rw'), (int, float)):
                    rw[(k, b)].append(z['ratio_rw'])
for k in sorted(ratio):
    v = sorted(ratio[k])
    med = lambda b: ('%.2f' % statistics.median(rw[(k, b)])) if rw[(k, b)] else '-'
    print('%-16s %-4s %dt  x r+w A %s  B %s   B/A median %.3f  range %.2f-%.2f  n=%d' %
          (k[0], k[1], k[2], med(A), med(B), statistics.median(v), v[0], v[-1], len(v)))
