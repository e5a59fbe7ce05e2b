#!/usr/bin/python3
"""multi_ab.py ROUNDS OUT.jsonl BIN1,BIN2,... BENCH_ARGS: every round runs each binary
(order rotated per round); per key the median G el/s ratio of each binary over BIN1 and
its median ratio_rw."""
import collections, json, statistics, subprocess, sys
rounds, out, bins = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(',')
args = sys.argv[4:]
g = collections.defaultdict(dict); rw = collections.defaultdict(list)
with open(out, 'w') as f:
    for r in range(rounds):
        order = bins[r % len(bins):] + bins[:r % len(bins)]
        for b in order:
            text = subprocess.run([b, 'bench', '--format', 'json'] + args, capture_output=True, text=True).stdout
            for x in json.loads(text):
                if '-tile' in x['layout'] and '--tiles' not in sys.argv: pass
                k = (x['layout'], x['dtype'], x['threads'])
                g[(k, r)][b] = x['gelems_per_s']
                if x.get('ratio_rw') not in (None, ''): rw[(k, b)].append(float(x['ratio_rw']))
                x['binary'], x['round'] = b, r; f.write(json.dumps(x) + '\n')
keys = sorted({k for (k, r) in g})
for k in keys:
    line = '%-14s %-4s %d' % k
    for b in bins:
        rs = [g[(k, r)][b] / g[(k, r)][bins[0]] for r in range(rounds) if b in g[(k, r)] and bins[0] in g[(k, r)]]
        m = statistics.median(rw[(k, b)]) if rw[(k, b)] else 0
        line += '  | %s rw %.2f x%.3f' % (b.split('/')[-1], m, statistics.median(rs))
    print(line)
