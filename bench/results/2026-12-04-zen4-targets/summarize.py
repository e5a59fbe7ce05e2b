#!/usr/bin/python3
"""Per-target summary of ab_targets.jsonl: in-cache tile rows and
from-memory rows, each target's median G el/s over AVX3_DL's (geometric
means, per output type), and the from-memory entries at >= 0.85 of the
read + write stream (0.7 for act-order) per target.
Usage: summarize.py ab_targets.jsonl"""
import collections
import json
import math
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
gel = collections.defaultdict(lambda: collections.defaultdict(list))
rw = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    k = (r['layout'], r['dtype'])
    gel[k][r['target']].append(r['gelems_per_s'])
    if r.get('ratio_rw') is not None:
        rw[k][r['target']].append(r['ratio_rw'])


def gm(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


BASE, OTHERS = 'AVX3_DL', ('AVX3', 'AVX2')
for kind in ('in cache (tile rows)', 'from memory'):
    q = collections.defaultdict(list)
    for k in sorted(gel):
        if (kind != 'from memory') != k[0].endswith('-tile'):
            continue
        m = {t: statistics.median(v) for t, v in gel[k].items()}
        for t in OTHERS:
            q[(t, 'all')].append(m[t] / m[BASE])
            q[(t, k[1])].append(m[t] / m[BASE])
    print('%s, G el/s over %s (geometric mean over %d rows):' % (kind, BASE, len(q[(OTHERS[0], 'all')])))
    for t in OTHERS:
        print('  %-5s all %.3f, f32 %.3f, f16 %.3f, bf16 %.3f' %
              (t, gm(q[(t, 'all')]), gm(q[(t, 'f32')]), gm(q[(t, 'f16')]), gm(q[(t, 'bf16')])))
print('from memory, entries at >= 0.85 x r+w (0.7 act-order) / entries with a ratio:')
for t in (BASE,) + OTHERS:
    met, n = collections.Counter(), collections.Counter()
    for k in rw:
        if rw[k].get(t):
            n[k[1]] += 1
            met[k[1]] += statistics.median(rw[k][t]) >= (0.7 if 'act' in k[0] else 0.85)
    print('  %-7s %s' % (t, ', '.join('%s %d/%d' % (d, met[d], n[d]) for d in ('f32', 'f16', 'bf16'))))
