// ONNX Runtime side of bench/matmul_vs_ort.py: a long-lived worker that
// loads MatMulNBits models and times them on request, so that the driver
// can interleave ONNX Runtime and nibble runs in one process pair.
// Protocol (one JSON object per line on stdin, one answer per line on
// stdout):
//   {"op": "load", "id": S, "path": P, "threads": T}  -> {"ok": true}
//   {"op": "time", "id": S, "m": M, "k": K, "reps": R, "x": X(optional)}
//     -> {"ms": [R per-run times], "y": first row of Y (first 8 values)}
// `onnxruntime-node` is resolved from NODE_PATH or bench/ort/node_modules
// (`npm install --ignore-scripts onnxruntime-node` there: the install
// script only fetches GPU providers).
'use strict';
const ort = require('onnxruntime-node');
const readline = require('readline');

const sessions = new Map();
const rl = readline.createInterface({input: process.stdin});

async function handle(req) {
  if (req.op === 'load') {
    const opts = {
      intraOpNumThreads: req.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      // Idle pool threads sleep instead of spinning: spinning ones would
      // slow the interleaved nibble runs on a small machine.
      extra: {session: {intra_op: {allow_spinning: '0'}}},
    };
    sessions.set(req.id, await ort.InferenceSession.create(req.path, opts));
    return {ok: true, version: require('onnxruntime-node/package.json').version};
  }
  if (req.op === 'time') {
    const s = sessions.get(req.id);
    const n = req.m * req.k;
    const x = new Float32Array(n);
    if (req.x) {
      x.set(req.x);
    } else {
      let v = 12345;  // a fixed pseudo-random activation in [-1, 1)
      for (let i = 0; i < n; ++i) {
        v = (v * 48271) % 2147483647;  // MINSTD: exact in doubles
        x[i] = v / 1073741824 - 1;
      }
    }
    const feeds = {A: new ort.Tensor('float32', x, [req.m, req.k])};
    let out = await s.run(feeds);  // warm-up (prepacking happened at load)
    const ms = [];
    for (let r = 0; r < req.reps; ++r) {
      const t0 = process.hrtime.bigint();
      out = await s.run(feeds);
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const y = out.Y.data;
    return {ms, y: Array.from(y.slice(0, Math.min(8, y.length)))};
  }
  throw new Error('unknown op ' + req.op);
}

let chain = Promise.resolve();
rl.on('line', (line) => {
  chain = chain.then(async () => {
    let ans;
    try {
      ans = await handle(JSON.parse(line));
    } catch (e) {
      ans = {error: String(e && e.message ? e.message : e)};
    }
    process.stdout.write(JSON.stringify(ans) + '\n');
  });
});
