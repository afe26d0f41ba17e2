// Runs an ONNX model exported by `memunet export --format onnx` in ONNX
// Runtime (the npm package onnxruntime-node) on the cases the reference
// program wrote, and compares its output with memunet's logits (or their
// softmax): the largest absolute difference and the share of pixels whose
// argmax agrees, per case and over all.
//
//   node check.mjs --cases DIR --model m.onnx [--input normalized|raw]
//        [--output logits|probabilities] [--max-diff 1e-4] [--min-agree 0.999]
//        [--json FILE]
//
// Prints one line per case and a last line over all of them (and writes
// the figures as JSON to --json); exits 1 where a case is beyond
// --max-diff or below --min-agree, 2 on a usage error.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import ort from 'onnxruntime-node';

const { values: a } = parseArgs({
  options: {
    cases: { type: 'string' },
    model: { type: 'string' },
    input: { type: 'string', default: 'normalized' },
    output: { type: 'string', default: 'logits' },
    'max-diff': { type: 'string', default: '1e-4' },
    'min-agree': { type: 'string', default: '0.999' },
    json: { type: 'string' },
  },
});
if (!a.cases || !a.model || !['normalized', 'raw'].includes(a.input) || !['logits', 'probabilities'].includes(a.output)) {
  console.error('usage: node check.mjs --cases DIR --model m.onnx [--input normalized|raw] [--output logits|probabilities] [--max-diff 1e-4] [--min-agree 0.999]');
  process.exit(2);
}
const maxDiff = Number(a['max-diff']);
const minAgree = Number(a['min-agree']);

function readF32(path) {
  const b = readFileSync(path);
  const out = new Float32Array(b.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = b.readFloatLE(4 * i);
  return out;
}

// softmax over the classes of (N,K,H,W) logits, in float64.
function softmax(x, n, k, plane) {
  const out = new Float64Array(x.length);
  for (let i = 0; i < n; i++) {
    for (let p = 0; p < plane; p++) {
      let m = -Infinity;
      for (let j = 0; j < k; j++) m = Math.max(m, x[(i * k + j) * plane + p]);
      let s = 0;
      for (let j = 0; j < k; j++) s += Math.exp(x[(i * k + j) * plane + p] - m);
      for (let j = 0; j < k; j++) out[(i * k + j) * plane + p] = Math.exp(x[(i * k + j) * plane + p] - m) / s;
    }
  }
  return out;
}

// argmax over the classes at pixel p of image i; the lowest class on a tie
// (memunet's rule).
function argmax(x, i, k, plane, p) {
  let best = 0;
  for (let j = 1; j < k; j++) if (x[(i * k + j) * plane + p] > x[(i * k + best) * plane + p]) best = j;
  return best;
}

const { cases, step } = JSON.parse(readFileSync(join(a.cases, 'cases.json'), 'utf8'));
const session = await ort.InferenceSession.create(a.model);
const [inName] = session.inputNames;
const [outName] = session.outputNames;
let worst = 0, agreed = 0, pixels = 0, failed = false;
for (const c of cases) {
  const plane = c.H * c.W;
  const x = readF32(join(a.cases, a.input === 'raw' ? c.Raw : c.Normalized));
  let want = readF32(join(a.cases, c.Logits));
  if (a.output === 'probabilities') want = softmax(want, c.N, c.Classes, plane);
  const res = await session.run({ [inName]: new ort.Tensor('float32', x, [c.N, c.C, c.H, c.W]) });
  const got = res[outName];
  if (got.dims.join() !== [c.N, c.Classes, c.H, c.W].join()) {
    console.log(`${c.N}x${c.C}x${c.H}x${c.W}: output ${outName} has dims [${got.dims}], want [${c.N},${c.Classes},${c.H},${c.W}]`);
    failed = true;
    continue;
  }
  let diff = 0, agree = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got.data[i] - want[i]);
    diff = Number.isNaN(d) ? Infinity : Math.max(diff, d);
  }
  for (let i = 0; i < c.N; i++) {
    for (let p = 0; p < plane; p++) if (argmax(got.data, i, c.Classes, plane, p) === argmax(want, i, c.Classes, plane, p)) agree++;
  }
  const share = agree / (c.N * plane);
  const ok = diff <= maxDiff && share >= minAgree;
  failed ||= !ok;
  worst = Math.max(worst, diff);
  agreed += agree;
  pixels += c.N * plane;
  console.log(`  batch ${c.N}, ${c.H}x${c.W}: max |${a.output} difference| ${diff.toExponential(2)}, argmax agrees on ${(100 * share).toFixed(3)}% of ${c.N * plane} pixels${ok ? '' : '  <- FAIL'}`);
}
const version = ort.env.versions?.node ?? 'unknown';
console.log(`all: max |${a.output} difference| ${worst.toExponential(2)}, argmax agrees on ${(100 * agreed / pixels).toFixed(3)}% (${cases.length} cases, onnxruntime-node ${version}; limits ${maxDiff}, ${100 * minAgree}%)${failed ? '  FAILED' : ''}`);
if (a.json) {
  writeFileSync(a.json, JSON.stringify({ model: a.model, step, onnxruntime: version, input: a.input, output: a.output,
    max_abs_diff: worst, argmax_agree: agreed / pixels, max_diff_allowed: String(maxDiff), min_agree: minAgree, ok: !failed }) + '\n');
}
process.exit(failed ? 1 : 0);
