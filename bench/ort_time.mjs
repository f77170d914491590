// Times one ONNX model in ONNX Runtime (onnxruntime-node) for bench/compare.py.
//
// Usage: node ort_time.mjs JOB.json   (or the job JSON on standard input)
//
// The job: {"model": path, "inputs": [{"name", "dtype", "shape", "values"}], "outputs": [...], "threads",
// "iterations", "warmup", "budget_s", "prealloc", "profile_prefix"}. The inputs are made before
// timing. Each `session.run` is timed twice:
// - from Node (node_*_ms): the wall time of `await session.run(...)`. This includes the Node
//   binding's work around ONNX Runtime: it copies every output into a new JavaScript buffer (also
//   with preallocated outputs), and on this kind of machine the page faults of those fresh
//   buffers cost far more than the operator itself (a 4 MB output adds ~15 ms);
// - by ONNX Runtime's own profiler (median_ms, min_ms, max_ms): the `model_run` event, i.e.
//   InferenceSession::Run in C++ with its input and output handling, without the binding.
// Prints one JSON object, or {"error": "..."} (exit 0 either way, so the caller can report "n/a"
// for a model that ONNX Runtime cannot load or run).

import { readFileSync, readdirSync, unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

function fail(message) {
  process.stdout.write(JSON.stringify({ error: message }) + '\n');
  process.exit(0);
}

let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  fail(`cannot load onnxruntime-node (run 'npm install --ignore-scripts' in bench/): ${e.message}`);
}

const job = JSON.parse(readFileSync(process.argv[2] ?? 0, 'utf8'));

// float32 -> IEEE binary16 bits, round to nearest even (subnormals, infinities and NaN kept).
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function toHalfBits(value) {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (h & 1))) h += 1;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h += 1;  // may carry into the exponent: fine
  return sign | h;
}

// float32 -> bfloat16 bits, round to nearest even.
function toBfloat16Bits(value) {
  f32[0] = value;
  const x = u32[0];
  if ((x & 0x7fffffff) > 0x7f800000) return (x >>> 16) | 0x40;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

// One floating term of the kind `values` names, like `cumulus perf`'s KIND:DIMS inputs: random
// (uniform [-1, 1)), normal (standard normal, Box-Muller) or unit (uniform [0, 1)).
function termMaker(values) {
  switch (values ?? 'random') {
    case 'random':
      return () => Math.random() * 2 - 1;
    case 'unit':
      return () => Math.random();
    case 'normal':
      return () => Math.sqrt(-2 * Math.log(1 - Math.random())) * Math.cos(2 * Math.PI * Math.random());
    default:
      throw new Error(`unknown input values ${values}`);
  }
}

// Random values like `cumulus perf`'s: floating terms as termMaker makes them, uniform integers in
// [-100, 100] for signed integers.
function makeTensor({ dtype, shape, values }) {
  const n = shape.reduce((a, b) => a * b, 1);
  const term = termMaker(values);
  let data;
  switch (dtype) {
    case 'float32':
      data = new Float32Array(n);
      for (let i = 0; i < n; ++i) data[i] = term();
      break;
    case 'float64':
      data = new Float64Array(n);
      for (let i = 0; i < n; ++i) data[i] = term();
      break;
    case 'float16':
      data = new Uint16Array(n);
      for (let i = 0; i < n; ++i) data[i] = toHalfBits(term());
      break;
    case 'bfloat16':
      data = new Uint16Array(n);
      for (let i = 0; i < n; ++i) data[i] = toBfloat16Bits(term());
      break;
    case 'int32':
      data = new Int32Array(n);
      for (let i = 0; i < n; ++i) data[i] = Math.floor(Math.random() * 201) - 100;
      break;
    case 'int64':
      data = new BigInt64Array(n);
      for (let i = 0; i < n; ++i) data[i] = BigInt(Math.floor(Math.random() * 201) - 100);
      break;
    default:
      throw new Error(`unsupported input type ${dtype}`);
  }
  return new ort.Tensor(dtype, data, shape);
}

function emptyTensor({ dtype, shape }) {
  const n = shape.reduce((a, b) => a * b, 1);
  const ctor = { float32: Float32Array, float64: Float64Array, float16: Uint16Array,
    bfloat16: Uint16Array, int32: Int32Array, int64: BigInt64Array }[dtype];
  if (!ctor) throw new Error(`unsupported output type ${dtype}`);
  const data = new ctor(n);
  data.fill(dtype === 'int64' ? 0n : 0);  // touch the pages before timing
  return new ort.Tensor(dtype, data, shape);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

async function main() {
  let session;
  try {
    session = await ort.InferenceSession.create(job.model, {
      intraOpNumThreads: job.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      enableProfiling: Boolean(job.profile_prefix),
      ...(job.profile_prefix ? { profileFilePrefix: job.profile_prefix } : {}),
    });
  } catch (e) {
    fail(`load: ${String(e.message ?? e).split('\n')[0]}`);
  }

  let feeds = {};
  try {
    for (const input of job.inputs) feeds[input.name] = makeTensor(input);
  } catch (e) {
    fail(`input: ${e.message}`);
  }

  let fetches;
  if (job.prealloc) {
    try {
      fetches = {};
      for (const output of job.outputs) fetches[output.name] = emptyTensor(output);
    } catch (e) {
      fail(`output: ${e.message}`);
    }
  }

  const run = fetches ? () => session.run(feeds, fetches) : () => session.run(feeds);
  const once = async () => {
    const t0 = process.hrtime.bigint();
    await run();
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };

  let first;
  try {
    first = await once();
  } catch (e) {
    fail(`run: ${String(e.message ?? e).split('\n')[0]}`);
  }

  // Cap the time spent on a slow model: at least 3 timed runs, at most `iterations`.
  let iterations = job.iterations;
  let warmup = job.warmup;
  const budgetMs = job.budget_s * 1000;
  if (first * (iterations + warmup) > budgetMs) {
    iterations = Math.max(3, Math.min(iterations, Math.floor(budgetMs / first) - 1));
    warmup = 1;
  }
  for (let i = 1; i < warmup; ++i) await once();
  const ms = [];
  for (let i = 0; i < iterations; ++i) ms.push(await once());

  const result = {
    node_median_ms: median(ms),
    node_min_ms: Math.min(...ms),
    iterations,
    warmup,
    prealloc: Boolean(fetches),
  };
  if (job.profile_prefix) {
    const runs = profiledRuns(session, job.profile_prefix).slice(-iterations);
    if (runs.length === iterations) {
      result.median_ms = median(runs);
      result.min_ms = Math.min(...runs);
      result.max_ms = Math.max(...runs);
    } else {
      result.profile_error = `profile has ${runs.length} runs, expected at least ${iterations}`;
    }
  }
  if (result.median_ms === undefined) {
    result.median_ms = result.node_median_ms;
    result.min_ms = result.node_min_ms;
    result.max_ms = Math.max(...ms);
  }
  process.stdout.write(JSON.stringify(result) + '\n');
  await session.release?.();
}

// Ends profiling and returns the durations (ms) of the `model_run` events, in order; deletes the
// profile file.
function profiledRuns(session, prefix) {
  session.endProfiling();
  const dir = dirname(prefix);
  const files = readdirSync(dir).filter((f) => f.startsWith(basename(prefix)) && f.endsWith('.json'));
  const runs = [];
  for (const f of files) {
    const path = join(dir, f);
    const events = JSON.parse(readFileSync(path, 'utf8'));
    unlinkSync(path);
    const ordered = events.filter((e) => e.name === 'model_run').sort((a, b) => a.ts - b.ts);
    for (const e of ordered) runs.push(e.dur / 1000);
  }
  return runs;
}

main().catch((e) => fail(String(e?.message ?? e)));
