// Runs pairs of ONNX models (original, folded) in ONNX Runtime on the same
// seeded random inputs and checks that the outputs agree.
// Usage: node compare_models.js ORIG1 FOLDED1 [ORIG2 FOLDED2 ...]
// Prints PASS/FAIL per pair and "N passed, M failed"; exit 1 on failure.
'use strict';
const ort = require('onnxruntime-node');
const path = require('path');

let seed = 12345;
function rand() {  // deterministic, in [-1, 1)
  seed = (seed * 1103515245 + 12345) >>> 0;
  return (seed / 4294967296) * 2 - 1;
}

function f32ToF16(v) {  // round to nearest even
  const f = new Float32Array([v]);
  const u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const abs = u & 0x7fffffff;
  if (abs >= 0x477ff000) return sign | 0x7c00;
  if (abs >= 0x38800000) {
    const r = abs + 0xfff + ((abs >>> 13) & 1);
    return sign | ((r - 0x38000000) >>> 13);
  }
  const g = new Float32Array([new Float32Array(new Uint32Array([abs]).buffer)[0] + 0.5]);
  return sign | (new Uint32Array(g.buffer)[0] - 0x3f000000);
}
function f16ToF32(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * Math.pow(2, -24);
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * Math.pow(2, e - 15);
}

function makeInput(meta) {
  const n = meta.shape.reduce((a, b) => a * b, 1);
  if (meta.type === 'float32') {
    const d = new Float32Array(n);
    for (let i = 0; i < n; i++) d[i] = rand();
    return new ort.Tensor('float32', d, meta.shape);
  }
  if (meta.type === 'float16') {
    const d = new Uint16Array(n);
    for (let i = 0; i < n; i++) d[i] = f32ToF16(rand());
    return new ort.Tensor('float16', d, meta.shape);
  }
  throw new Error('unsupported input type ' + meta.type);
}

function values(t) {
  if (t.type === 'float16') return Array.from(t.data, f16ToF32);
  return Array.from(t.data);
}

async function comparePair(a, b) {
  // No graph optimizations: ONNX Runtime would otherwise fuse
  // DequantizeLinear -> MatMul of the original into its own (approximate)
  // quantized kernel, and we compare against the operators as written.
  const opts = {graphOptimizationLevel: 'disabled'};
  const sa = await ort.InferenceSession.create(a, opts);
  const sb = await ort.InferenceSession.create(b, opts);
  const feeds = {};
  for (const m of sa.inputMetadata) feeds[m.name] = makeInput(m);
  const ra = await sa.run(feeds);
  const rb = await sb.run(feeds);
  for (const name of sa.outputNames) {
    const x = ra[name], y = rb[name];
    if (!y) throw new Error('folded model lacks output ' + name);
    if (x.type !== y.type) throw new Error(`output ${name}: type ${y.type}, expected ${x.type}`);
    if (JSON.stringify(x.dims) !== JSON.stringify(y.dims)) {
      throw new Error(`output ${name}: dims ${y.dims}, expected ${x.dims}`);
    }
    const vx = values(x), vy = values(y);
    // The products accumulate in different orders; float16 models round more.
    const rtol = x.type === 'float16' ? 2e-2 : 1e-4, atol = x.type === 'float16' ? 2e-2 : 1e-4;
    let maxScale = 0;
    for (const v of vx) maxScale = Math.max(maxScale, Math.abs(v));
    for (let i = 0; i < vx.length; i++) {
      const tol = atol + rtol * Math.max(Math.abs(vx[i]), maxScale * 1e-2);
      if (!(Math.abs(vx[i] - vy[i]) <= tol)) {
        throw new Error(`output ${name}[${i}]: folded ${vy[i]}, original ${vx[i]}`);
      }
    }
  }
}

(async () => {
  const args = process.argv.slice(2);
  let passed = 0, failed = 0;
  for (let i = 0; i + 1 < args.length; i += 2) {
    const name = path.basename(args[i]);
    try {
      await comparePair(args[i], args[i + 1]);
      console.log('PASS ' + name);
      passed++;
    } catch (e) {
      console.log('FAIL ' + name + ': ' + e.message);
      failed++;
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed || passed === 0 ? 1 : 0);
})();
