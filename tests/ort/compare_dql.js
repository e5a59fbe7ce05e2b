// Runs the one-node DequantizeLinear models written by make_ort_differential
// in ONNX Runtime (CPU) and compares the output with nibble's, bit for bit
// (NaN matches NaN). Usage: node compare_dql.js DIR
// Prints a FAIL line per mismatch and "N passed, M failed, K not run by ONNX
// Runtime"; exit 1 on a mismatch.
'use strict';
const ort = require('onnxruntime-node');
const fs = require('fs');
const path = require('path');

function isNan(bytes, off, size, type) {
  if (size === 4) {
    const u = bytes.readUInt32LE(off);
    return (u & 0x7fffffff) > 0x7f800000;
  }
  const h = bytes.readUInt16LE(off);
  return type === 'float16' ? (h & 0x7fff) > 0x7c00 : (h & 0x7fff) > 0x7f80;
}

async function main() {
  const dir = process.argv[2];
  const cases = fs.readdirSync(dir).filter((d) => d.startsWith('case_')).sort();
  let pass = 0, fail = 0, unsupported = 0;
  const reasons = {};
  for (const c of cases) {
    const about = fs.readFileSync(path.join(dir, c, 'about.txt'), 'utf8').trim();
    let out;
    try {
      const s = await ort.InferenceSession.create(path.join(dir, c, 'model.onnx'),
                                                  {graphOptimizationLevel: 'disabled'});
      const r = await s.run({});
      out = r.y;
    } catch (e) {
      unsupported++;
      const key = String(e.message).split('\n')[0].slice(0, 120);
      reasons[key] = (reasons[key] || 0) + 1;
      continue;
    }
    const want = fs.readFileSync(path.join(dir, c, 'expected.bin'));
    const got = Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength);
    const size = out.type === 'float32' ? 4 : 2;
    let bad = -1;
    if (got.length !== want.length) bad = 0;
    for (let i = 0; bad < 0 && i < want.length; i += size) {
      if (got.compare(want, i, i + size, i, i + size) === 0) continue;
      if (isNan(got, i, size, out.type) && isNan(want, i, size, out.type)) continue;
      bad = i / size;
    }
    if (bad >= 0) {
      fail++;
      console.log(`FAIL ${c} (${about}): element ${bad} differs` +
                  (bad * size < got.length ? ` (ORT ${got.slice(bad * size, bad * size + size).toString('hex')}, ` +
                   `nibble ${want.slice(bad * size, bad * size + size).toString('hex')})` : ''));
    } else {
      pass++;
    }
  }
  for (const [k, n] of Object.entries(reasons)) console.log(`not run by ONNX Runtime (${n}x): ${k}`);
  console.log(`${pass} passed, ${fail} failed, ${unsupported} not run by ONNX Runtime`);
  process.exit(fail === 0 && pass > 0 ? 0 : 1);
}
main().catch((e) => { console.error(e); process.exit(1); });
