#!/usr/bin/python3
"""A/B of nibble builds on a shared machine: the binaries' `nibble bench`
runs alternate, round by round, so both see the same load.

Usage: ab_binaries.py BIN_A,BIN_B[,...] ROUNDS OUT.jsonl BENCH_ARGS...
       ab_binaries.py --from OUT.jsonl   (the summary of a saved run again)
A binary may carry environment variables for its runs: VAR=VALUE:BIN
(several: A=1:B=2:BIN), and bench arguments of its own after '@' (BIN@ARG,
several: BIN@A@B, e.g. build/nibble@--target=AVX2), so one build can be
compared with itself under another setting or on another kernel target. Every row goes to OUT.jsonl (with `binary` and `round`).
Printed, per row key and binary:
- the dequantizing bench: the median G el/s per (layout, dtype, threads)
  and the median ratio_rw where the bench gave one (n: how many rounds),
  then, for each binary after the first, the geometric mean (and range)
  over the rows of its median G el/s over the first binary's, per thread
  count and in all;
- `--matmul` rows: every round's milliseconds per (layout, N x K, M,
  threads).
"""
import collections
import json
import math
import os
import statistics
import subprocess
import sys


def run(spec, args):
    """Rows of one `nibble bench --format json` run of spec (VAR=V:...:BIN)."""
    *assignments, binary = spec.split(':')
    binary, *own_args = binary.split('@')
    env = dict(os.environ)
    for a in assignments:
        name, value = a.split('=', 1)
        env[name] = value
    out = subprocess.run([binary, 'bench', '--format', 'json'] + args + own_args,
                         capture_output=True, text=True, env=env).stdout
    text = out.strip()
    if text.startswith('['):  # the dequantizing bench: one JSON array
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.startswith('{')]


def label(spec):
    """A spec's name in the summary: its settings and binary's file name."""
    *assignments, binary = spec.split(':')
    binary, *own_args = binary.split('@')
    return ' '.join(assignments + [os.path.basename(binary)] + own_args)


def rows_of_runs(specs, rounds, save, args):
    """Runs every spec `rounds` times, alternating; yields and saves each row."""
    for r in range(rounds):
        for spec in specs:
            for row in run(spec, args):
                row['binary'] = spec
                row['round'] = r
                save.write(json.dumps(row) + '\n')
                save.flush()
                yield row


def main():
    if sys.argv[1] == '--from':  # the summary of a saved OUT.jsonl, again
        rows = [json.loads(line) for line in open(sys.argv[2])]
        specs = list(dict.fromkeys(row['binary'] for row in rows))
    else:
        specs = sys.argv[1].split(',')
        rows = rows_of_runs(specs, int(sys.argv[2]), open(sys.argv[3], 'w'), sys.argv[4:])
    gel = collections.defaultdict(lambda: collections.defaultdict(list))
    rw = collections.defaultdict(lambda: collections.defaultdict(list))
    ms = collections.defaultdict(lambda: collections.defaultdict(list))
    for row in rows:
        spec = row['binary']
        if 'm' in row:
            key = (row['layout'], row['n'], row['k'], row['m'], row['threads'])
            ms[key][spec].append(row['seconds'] * 1e3)
            continue
        key = (row['layout'], row['dtype'], row['threads'])
        gel[key][spec].append(row['gelems_per_s'])
        if row.get('ratio_rw') is not None:
            rw[key][spec].append(row['ratio_rw'])
    for key in sorted(gel):
        line = '%-14s %-4s %2d ' % key
        for spec in specs:
            line += ' | %-12s %6.2f Gel/s' % (label(spec), statistics.median(gel[key][spec]))
            if rw[key][spec]:
                line += ' rw %.2f (n=%d)' % (statistics.median(rw[key][spec]), len(rw[key][spec]))
        print(line)
    for spec in specs[1:]:
        by_threads = collections.defaultdict(list)
        for key in gel:
            if gel[key][spec] and gel[key][specs[0]]:
                q = statistics.median(gel[key][spec]) / statistics.median(gel[key][specs[0]])
                by_threads[key[2]].append(q)
                by_threads['all'].append(q)
        for t in sorted(by_threads, key=str):
            qs = by_threads[t]
            print('%s / %s, threads %s: geometric mean %.3f over %d rows (%.2f-%.2f)' %
                  (label(spec), label(specs[0]), t,
                   math.exp(sum(map(math.log, qs)) / len(qs)), len(qs), min(qs), max(qs)))
    for key in sorted(ms):
        line = '%-12s %5dx%-5d M=%-4d t=%d' % key
        for spec in specs:
            line += ' | %s %s ms' % (label(spec), ', '.join('%.2f' % v for v in ms[key][spec]))
        print(line)


if __name__ == '__main__':
    main()
