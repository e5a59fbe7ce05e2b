#!/usr/bin/python3
"""Whole-tensor A/B with the order of the two binaries swapped every round
(on this guest the second process of a pair runs slower): per (layout,
dtype, threads) the median ratio_rw of each binary and the median of the
per-round ratios B / A of G el/s.

    alt_ab.py [--tiles] BIN_A BIN_B ROUNDS OUT.jsonl BENCH_ARGS...

--tiles: the in-cache '-tile' rows too (else whole tensors only).
"""
import collections, json, statistics, subprocess, sys
tiles = sys.argv[1] == '--tiles'
argv = sys.argv[2:] if tiles else sys.argv[1:]
A, B, rounds, out = argv[0], argv[1], int(argv[2]), argv[3]
args = argv[4:]
rw = collections.defaultdict(list)
ratio = collections.defaultdict(list)
with open(out, 'w') as f:
    for r in range(rounds):
        got = {}
        for b in ([A, B] if r % 2 == 0 else [B, A]):
            text = subprocess.run([b, 'bench', '--format', 'json'] + args,
                                  capture_output=True, text=True).stdout
            rows = [x for x in json.loads(text) if tiles or '-tile' not in x['layout']]
            got[b] = {(x['layout'], x['dtype'], x['threads']): x for x in rows}
            for x in rows:
                x['binary'], x['round'] = b, r
                f.write(json.dumps(x) + '\n')
        for k, x in got[A].items():
            y = got[B][k]
            rw[k, A].append(x.get('ratio_rw') or 0)
            rw[k, B].append(y.get('ratio_rw') or 0)
            ratio[k].append(y['gelems_per_s'] / x['gelems_per_s'])
for k in sorted(ratio):
    print(*k, f"A rw {statistics.median(rw[k, A]):.2f}  B rw {statistics.median(rw[k, B]):.2f}"
          f"  B/A median {statistics.median(ratio[k]):.3f} ({min(ratio[k]):.2f}-{max(ratio[k]):.2f}) n={len(ratio[k])}")
