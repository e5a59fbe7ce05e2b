import json,subprocess,sys,statistics,collections
# multi_ab.py ROUNDS THREADS LAYOUT DTYPES G BIN...
rounds=int(sys.argv[1]); threads=sys.argv[2]; layout=sys.argv[3]; dtypes=sys.argv[4]; g=sys.argv[5]; bins=sys.argv[6:]
res=collections.defaultdict(list)
for i in range(rounds):
    order=bins if i%2==0 else bins[::-1]
    for b in order:
        out=subprocess.run([b,'bench','--format','json','--layout',layout,'--dtype',dtypes,'--threads',threads,'--reps','7','--group-sizes',g,'--no-in-cache'],capture_output=True,text=True).stdout
        for r in json.loads(out):
            res[(b,r['dtype'],r['threads'])].append(r['gelems_per_s'])
base=bins[0]
for k,v in sorted(res.items(), key=lambda kv:(kv[0][1],kv[0][2],bins.index(kv[0][0]))):
    b=res[(base,k[1],k[2])]
    rat=sorted(x/y for x,y in zip(v,b))
    print(f"{k[0]:22s} {k[1]:5s} t{k[2]} median {statistics.median(v):.2f} G el/s  vs base {statistics.median(rat):.3f} ({rat[0]:.2f}-{rat[-1]:.2f})")
