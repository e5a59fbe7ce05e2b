#!/usr/bin/python3
"""Alternated runs of one nibble build under several NIBBLE_AWQ_V values
(a temporary build selected AWQ's code-tile band / chunk / fetch distance
by it): per variant, layout and dtype the median and max G el/s.

    variants.py BIN V1,V2,... ROUNDS LAYOUTS DTYPES [THREADS]
"""
import json,subprocess,sys,os,collections,statistics
b=sys.argv[1]; variants=sys.argv[2].split(','); rounds=int(sys.argv[3]); lay=sys.argv[4]; dt=sys.argv[5]
res=collections.defaultdict(list)
for i in range(rounds):
    for v in (variants if i%2==0 else variants[::-1]):
        env=dict(os.environ, NIBBLE_AWQ_V=v)
        out=subprocess.run([b,'bench','--format','json','--layout',lay,'--dtype',dt,'--threads',sys.argv[6] if len(sys.argv)>6 else '1','--reps','7','--group-sizes','128'],capture_output=True,text=True,env=env).stdout
        for r in json.loads(out):
            res[(v,r['layout'],r['dtype'])].append(r['gelems_per_s'])
for k,x in sorted(res.items()):
    print(*k, 'median %.2f max %.2f'%(statistics.median(x),max(x)), ' '.join('%.2f'%y for y in x))
