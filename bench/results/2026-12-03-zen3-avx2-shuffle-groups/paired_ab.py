#!/usr/bin/python3
"""Paired A/B of two nibble builds' in-cache tile rows (the script used
for this folder's paired_*.txt): for each round and layout the two
binaries run back to back (order swapped every round), and each row's
figure is the ratio B / A of the pair's best repetitions (G el/s), so
that the machine's slow phases, which last seconds, divide out; printed:
the median ratio over the rounds and its range.

    paired_ab.py BIN_A BIN_B ROUNDS LAYOUTS DTYPES GROUP_SIZES

(The copy that made paired_rows_g128.txt keyed rows by layout and dtype
only, so of its two group sizes 32,128 the last, 128, was kept.)
"""
import json,subprocess,sys,statistics,collections
A,B=sys.argv[1],sys.argv[2]; rounds=int(sys.argv[3]); layouts=sys.argv[4].split(','); dtypes=sys.argv[5]; g=sys.argv[6]
res=collections.defaultdict(list)
def run(b,l):
    out=subprocess.run([b,'bench','--format','json','--layout',l,'--dtype',dtypes,'--threads','1','--reps','5','--group-sizes',g],capture_output=True,text=True).stdout
    rows=json.loads(out)
    return {(r['layout'],r['group_size'],r['dtype']):r['gelems_per_s']*r['out_gbps_max']/r['out_gbps'] for r in rows if '-tile' in r['layout']}
for i in range(rounds):
    for l in layouts:
        order=[A,B] if i%2==0 else [B,A]
        r={b:run(b,l) for b in order}
        for k in r[A]:
            res[k].append(r[B][k]/r[A][k])
for k,v in res.items():
    v=sorted(v)
    print(*k, f"median B/A {statistics.median(v):.3f}  range {v[0]:.2f}-{v[-1]:.2f}  n={len(v)}")
