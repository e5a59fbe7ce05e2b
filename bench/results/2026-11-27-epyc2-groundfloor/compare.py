import csv, statistics, sys, glob
def load(v):
    rows = {}
    for f in sorted(glob.glob('/tmp/ab/%s_*.csv' % v)):
        for r in csv.DictReader(open(f)):
            k = (r['layout'], r['dtype'], r['threads'])
            rows.setdefault(k, []).append((float(r['ratio_rw']) if r['ratio_rw'] else None, float(r['out_gbps'])))
    return rows
old, new = load('old'), load('new')
worse = []; lines = []
ratios = []
for k in sorted(old, key=lambda k: (k[2], k[0], k[1])):
    o = [x[1] for x in old[k]]; n = [x[1] for x in new.get(k, [])]
    if not n: continue
    mo, mn = statistics.median(o), statistics.median(n)
    # spread of each side: (max-min)/median
    so = (max(o)-min(o))/mo; sn = (max(n)-min(n))/mn
    r = mn/mo; ratios.append(r)
    ro = statistics.median([x[0] for x in old[k] if x[0] is not None] or [0]); rn = statistics.median([x[0] for x in new[k] if x[0] is not None] or [0])
    lines.append("%-9s %-4s t=%s  old %6.2f GB/s (±%4.1f%%)  new %6.2f GB/s (±%4.1f%%)  new/old %.3f  ratio_rw %.2f -> %.2f" % (k[0], k[1], k[2], mo, 50*so, mn, 50*sn, r, ro, rn))
    if r < 1 - max(so, sn) / 2 - 0.05: worse.append(lines[-1])
print("\n".join(lines))
print("entries", len(ratios), "median new/old %.3f" % statistics.median(ratios), "min %.3f max %.3f" % (min(ratios), max(ratios)))
print("slower beyond the spread + 5%:", len(worse))
print("\n".join(worse))
# ratio_rw (each row against its own yardstick, same run), valid rows only
rr=[]
for k in old:
    o=[x[0] for x in old[k] if x[0]]; n=[x[0] for x in new.get(k,[]) if x[0]]
    if o and n: rr.append(statistics.median(n)/statistics.median(o))
print("ratio_rw new/old over %d entries: median %.3f, quartiles %.3f %.3f" % (len(rr), statistics.median(rr), sorted(rr)[len(rr)//4], sorted(rr)[3*len(rr)//4]))
