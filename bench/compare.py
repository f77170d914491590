#!/usr/bin/python3
"""Compare cumulus with ONNX Runtime, NumPy and PyTorch against the streaming ceiling.

Run it with Debian's Python (/usr/bin/python3, where python3-numpy, python3-torch and python3-onnx
install); see bench/README.md. For every workload it builds an ONNX model in a scratch directory,
times it with `cumulus perf` (optionally with the instruction set capped, --isa), with ONNX Runtime
(bench/ort_time.mjs on onnxruntime-node), with NumPy and with PyTorch (each in its own process),
and, in the same run, its streaming ceiling (bench/stream_timer.cc: a copy with non-temporal stores
of a scan's input, or the K-input streaming add of a Sum's inputs, asking 8 KiB ahead, on huge
pages, the fastest of the vector widths it tries) and a memcpy of half the bytes.
It prints one markdown table and writes it to --out.

Every runtime gets the same kind of inputs: uniform [-1, 1) for floating types, uniform integers in
[-100, 100] for the integer types (what `cumulus perf --input x=random:DIMS` makes), or, where a
workload says so, standard normal or uniform [0, 1) floating terms (normal:DIMS, unit:DIMS), and
the same thread count.
Only the operator call is timed (the medians are of single runs, after warm-up runs).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
SYSTEM_PYTHON = "/usr/bin/python3"

# Bytes per element and the names each runtime uses for the type.
DTYPES = {
    #        size  onnx elem type   ORT (JS)    numpy      torch
    "f32": (4, "FLOAT", "float32", "float32", "float32"),
    "f64": (8, "DOUBLE", "float64", "float64", "float64"),
    "f16": (2, "FLOAT16", "float16", "float16", "float16"),
    "bf16": (2, "BFLOAT16", "bfloat16", None, "bfloat16"),
    "i32": (4, "INT32", "int32", "int32", "int32"),
    "i64": (8, "INT64", "int64", "int64", "int64"),
}


@dataclass
class Workload:
    key: str                     # a short name for --only; the table shows label()
    op: str                      # CumSum, CumProd or Sum
    dtype: str                   # key of DTYPES
    shapes: list[list[int]]      # input shapes (one for the scans)
    quick_shapes: list[list[int]]
    axis: int = 0                # scans only
    small: bool = False          # in-cache: more iterations
    values: str = "random"       # the floating terms: random [-1, 1), normal or unit [0, 1)

    def input_shapes(self, quick: bool) -> list[list[int]]:
        return self.quick_shapes if quick else self.shapes

    def label(self, quick: bool) -> str:
        shapes = self.input_shapes(quick)
        if self.op == "Sum":
            if all(s == shapes[0] for s in shapes):
                what = f"{len(shapes)} x {_shape_text(shapes[0])}"
            else:
                what = " + ".join(_shape_text(s) if s else "scalar" for s in shapes)
        else:
            what = _shape_text(shapes[0])
            if len(shapes[0]) > 1:
                what += f" axis {self.axis}"
        terms = {"random": "", "normal": " normal terms", "unit": " terms in [0, 1)"}[self.values]
        return (f"{self.op} {self.dtype} {what}{terms}"
                + (" (in cache)" if self.small else ""))


def _shape_text(shape: list[int]) -> str:
    def dim(d):
        return f"{d >> 20}M" if d >= 1 << 20 and d % (1 << 20) == 0 and len(shape) == 1 else str(d)
    return "[" + ",".join(dim(d) for d in shape) + "]"


M64 = 64 * 1024 * 1024
WORKLOADS = [
    Workload("cumsum-f32-1d", "CumSum", "f32", [[M64]], [[1 << 20]]),
    Workload("cumsum-f32-2d-axis0", "CumSum", "f32", [[4096, 16384]], [[256, 4096]], 0),
    Workload("cumsum-f32-2d-axis1", "CumSum", "f32", [[4096, 16384]], [[256, 4096]], 1),
    Workload("cumsum-f32-short-rows", "CumSum", "f32", [[8388608, 8]], [[131072, 8]], 1),
    Workload("cumsum-f16", "CumSum", "f16", [[M64]], [[1 << 20]]),
    Workload("cumsum-bf16", "CumSum", "bf16", [[M64]], [[1 << 20]]),
    Workload("cumsum-f64", "CumSum", "f64", [[M64 // 2]], [[1 << 19]]),
    Workload("cumsum-i32", "CumSum", "i32", [[M64]], [[1 << 20]]),
    Workload("cumprod-f32", "CumProd", "f32", [[M64]], [[1 << 20]]),
    Workload("sum-3", "Sum", "f32", [[4096, 16384]] * 3, [[256, 4096]] * 3),
    Workload("sum-broadcast", "Sum", "f32", [[4096, 16384], [16384], []], [[256, 4096], [4096], []]),
    Workload("sum-8", "Sum", "f32", [[1024, 16384]] * 8, [[64, 4096]] * 8),
    # Rows of a language model's vocabulary (128256 entries), one per sequence of a batch of 32.
    Workload("cumsum-f32-vocab", "CumSum", "f32", [[32, 128256]], [[2, 128256]], 1),
    Workload("cumsum-f16-vocab", "CumSum", "f16", [[32, 128256]], [[2, 128256]], 1),
    Workload("cumsum-bf16-vocab", "CumSum", "bf16", [[32, 128256]], [[2, 128256]], 1),
    Workload("cumsum-i64-2d-axis1", "CumSum", "i64", [[4096, 8192]], [[64, 8192]], 1),
    Workload("cumsum-f32-3d-axis1", "CumSum", "f32", [[8, 4096, 2048]], [[8, 64, 2048]], 1),
    Workload("cumsum-f32-rows-of-4", "CumSum", "f32", [[1 << 24, 4]], [[1 << 18, 4]], 1),
    Workload("cumprod-f64", "CumProd", "f64", [[M64 // 2]], [[1 << 19]]),
    Workload("sum-f16-3", "Sum", "f16", [[4096, 16384]] * 3, [[256, 4096]] * 3),
    Workload("small-1000", "CumSum", "f32", [[1000]], [[1000]], small=True),
    Workload("small-262144", "CumSum", "f32", [[262144]], [[262144]], small=True),
    # The exact sums' certificates depend on the terms' exponents and signs.
    Workload("cumsum-f32-normal", "CumSum", "f32", [[M64]], [[1 << 20]], values="normal"),
    Workload("small-262144-normal", "CumSum", "f32", [[262144]], [[262144]], small=True,
             values="normal"),
]


def broadcast_shape(shapes: list[list[int]]) -> list[int]:
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            if out[j] == 1:
                out[j] = d
            elif d not in (1, out[j]):
                raise ValueError(f"shapes {shapes} do not broadcast")
    return out


def numel(shape: list[int]) -> int:
    return math.prod(shape)


def output_shape(w: Workload, shapes: list[list[int]]) -> list[int]:
    return broadcast_shape(shapes) if w.op == "Sum" else shapes[0]


def input_names(w: Workload, shapes: list[list[int]]) -> list[str]:
    return [f"d{i}" for i in range(len(shapes))] if w.op == "Sum" else ["x"]


def moved_bytes(w: Workload, shapes: list[list[int]]) -> int:
    size = DTYPES[w.dtype][0]
    return size * (sum(numel(s) for s in shapes) + numel(output_shape(w, shapes)))


def ceiling_shape(w: Workload, shapes: list[list[int]]) -> tuple[int, int]:
    """(output bytes, inputs) of the streaming kernel that bounds the workload: a scan reads its
    input and writes its output once (a copy); a Sum reads each input of the output's size and
    writes the output (broadcast inputs, a row or a scalar, stay in cache and are left out; at
    least one input is read, so a Sum of broadcasts only is bounded by a copy)."""
    out = numel(output_shape(w, shapes))
    inputs = sum(1 for s in shapes if numel(s) == out) if w.op == "Sum" else 1
    return out * DTYPES[w.dtype][0], max(1, inputs)


# ---- models -------------------------------------------------------------------------------------


def build_model(w: Workload, shapes: list[list[int]], path: Path) -> None:
    """Writes the workload's model: inputs are the data tensors; the axis is a 0-D initializer."""
    import onnx
    from onnx import TensorProto, helper

    elem = getattr(TensorProto, DTYPES[w.dtype][1])
    names = input_names(w, shapes)
    inputs = [helper.make_tensor_value_info(n, elem, s) for n, s in zip(names, shapes)]
    outputs = [helper.make_tensor_value_info("y", elem, output_shape(w, shapes))]
    initializers = []
    if w.op == "Sum":
        node = helper.make_node("Sum", names, ["y"])
        opset = 13
    else:
        initializers.append(helper.make_tensor("axis", TensorProto.INT64, [], [w.axis]))
        node = helper.make_node(w.op, ["x", "axis"], ["y"])
        opset = 26 if w.op == "CumProd" else 14
    graph = helper.make_graph([node], w.op.lower(), inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="cumulus-bench")
    model.ir_version = 8  # cumulus reads IR 3-13; onnx 1.12's checker is not run (it has no opset 26)
    tmp = path.with_suffix(".tmp")
    onnx.save(model, str(tmp))
    tmp.replace(path)


# ---- the ceilings --------------------------------------------------------------------------------

STREAM_SOURCES = [BENCH_DIR / "stream_timer.cc", BENCH_DIR / "streaming.h"]


def build_stream_timer(workdir: Path) -> Path | None:
    """Compiles bench/stream_timer.cc into the scratch directory (again when a source is newer)."""
    exe = workdir / "stream_timer"
    if exe.exists() and all(p.stat().st_mtime <= exe.stat().st_mtime for p in STREAM_SOURCES):
        return exe
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        print("warning: no C++ compiler for the ceiling timer", file=sys.stderr)
        return None
    tmp = exe.with_suffix(".tmp")
    r = subprocess.run([cxx, "-O2", "-std=c++20", "-pthread", "-o", str(tmp),
                        str(STREAM_SOURCES[0])], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"warning: cannot build the ceiling timer: {r.stderr.strip()}", file=sys.stderr)
        return None
    tmp.replace(exe)
    return exe


# ---- the NumPy and PyTorch workers (run as `compare.py --worker numpy|torch` with a job on stdin)


def _time_calls(fn, iterations: int, warmup: int, budget_s: float) -> dict:
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first * (iterations + warmup) > budget_s:
        iterations = max(3, min(iterations, int(budget_s / first) - 1))
        warmup = 1
    for _ in range(warmup - 1):
        fn()
    ms = []
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        fn()
        ms.append((time.perf_counter_ns() - t0) / 1e6)
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms),
            "iterations": iterations, "warmup": warmup}


class Unsupported(Exception):
    pass


def _numpy_worker(job: dict) -> dict:
    import numpy as np

    name = DTYPES[job["dtype"]][3]
    if name is None:
        raise Unsupported("NumPy has no bfloat16")
    dtype = np.dtype(name)
    rng = np.random.default_rng(job.get("seed", 0))

    def make(shape):
        if dtype.kind == "f":
            wide = np.float32 if dtype.itemsize <= 4 else np.float64
            if job["values"] == "normal":
                return rng.standard_normal(shape, dtype=wide).astype(dtype, copy=False)
            low = 0 if job["values"] == "unit" else -1
            return (rng.random(shape, dtype=wide) * (1 - low) + low).astype(dtype, copy=False)
        return rng.integers(-100, 101, size=shape, dtype=dtype)

    xs = [np.asarray(make(s)) for s in job["shapes"]]
    out = np.zeros(job["out_shape"], dtype=dtype)
    op, axis = job["op"], job["axis"]
    if op == "CumSum":
        fn = lambda: np.cumsum(xs[0], axis=axis, dtype=dtype, out=out)  # noqa: E731
    elif op == "CumProd":
        fn = lambda: np.cumprod(xs[0], axis=axis, dtype=dtype, out=out)  # noqa: E731
    else:
        def fn():
            np.add(xs[0], xs[1], out=out)
            for x in xs[2:]:
                np.add(out, x, out=out)
    result = _time_calls(fn, job["iterations"], job["warmup"], job["budget_s"])
    result["version"] = np.__version__
    return result


def _torch_worker(job: dict) -> dict:
    import torch

    torch.set_num_threads(job["threads"])
    dtype = getattr(torch, DTYPES[job["dtype"]][4])
    gen = torch.Generator().manual_seed(job.get("seed", 0))

    def make(shape):
        if dtype.is_floating_point:
            wide = torch.float64 if dtype == torch.float64 else torch.float32
            if job["values"] == "normal":
                return torch.randn(shape, dtype=wide, generator=gen).to(dtype)
            low = 0 if job["values"] == "unit" else -1
            return (torch.rand(shape, dtype=wide, generator=gen) * (1 - low) + low).to(dtype)
        return torch.randint(-100, 101, shape, dtype=dtype, generator=gen)

    xs = [make(s) for s in job["shapes"]]
    out = torch.zeros(job["out_shape"], dtype=dtype)
    op, axis = job["op"], job["axis"]
    if op == "CumSum":
        fn = lambda: torch.cumsum(xs[0], axis, dtype=dtype, out=out)  # noqa: E731
    elif op == "CumProd":
        fn = lambda: torch.cumprod(xs[0], axis, dtype=dtype, out=out)  # noqa: E731
    else:
        def fn():
            torch.add(xs[0], xs[1], out=out)
            for x in xs[2:]:
                torch.add(out, x, out=out)
    with torch.inference_mode():
        try:
            fn()
        except (RuntimeError, TypeError) as e:
            raise Unsupported(str(e).splitlines()[0]) from e
        result = _time_calls(fn, job["iterations"], job["warmup"], job["budget_s"])
    result["version"] = torch.__version__
    return result


def worker_main(kind: str) -> int:
    job = json.load(sys.stdin)
    try:
        result = (_numpy_worker if kind == "numpy" else _torch_worker)(job)
    except Unsupported as e:
        result = {"error": str(e)}
    except ImportError as e:
        result = {"error": f"cannot import: {e}"}
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


# ---- the driver ---------------------------------------------------------------------------------


@dataclass
class Cell:
    ms: float | None = None
    error: str | None = None
    extra: dict = field(default_factory=dict)


def _run_json(cmd: list[str], *, stdin: str | None = None, env: dict | None = None,
              cwd: Path | None = None, timeout: float = 900) -> dict:
    try:
        r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, cwd=cwd,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    except OSError as e:
        return {"error": str(e)}
    lines = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("{")]
    if r.returncode != 0 or not lines:
        msg = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return {"error": msg}
    return json.loads(lines[-1])


def _cell(result: dict) -> Cell:
    if "error" in result:
        return Cell(error=result["error"])
    return Cell(ms=float(result["median_ms"]), extra=result)


def _peer_env() -> dict:
    env = dict(os.environ)
    # These may be set on the benchmark machines and can slow NumPy down (cumsum uses no BLAS,
    # but unset them anyway for fairness).
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    return env


def _input_spec(shape: list[int], values: str) -> str:
    return f"{values}:" + ("x".join(map(str, shape)) if shape else "scalar")


def cumulus_env(cap: str | None) -> dict | None:
    """The environment of a cumulus run: CUMULUS_ISA=cap, none for cap "" (the best the CPU has),
    the inherited one for cap None."""
    if cap is None:
        return None
    env = dict(os.environ)
    env.pop("CUMULUS_ISA", None)
    if cap:
        env["CUMULUS_ISA"] = cap
    return env


def time_cumulus(args, w: Workload, shapes, model: Path, iterations: int, warmup: int,
                 cap: str | None) -> Cell:
    cmd = [str(args.cumulus), "perf", str(model), "--iterations", str(iterations),
           "--warmup", str(warmup), "--threads", str(args.threads), "--json", "--seed", "1"]
    for name, shape in zip(input_names(w, shapes), shapes):
        cmd += ["--input", f"{name}={_input_spec(shape, w.values)}"]
    cell = _cell(_run_json(cmd, env=cumulus_env(cap)))
    if cell.ms is not None and cell.extra.get("bytes") != moved_bytes(w, shapes):
        print(f"warning: {w.key}: cumulus counted {cell.extra.get('bytes')} bytes, "
              f"expected {moved_bytes(w, shapes)}", file=sys.stderr)
    return cell


def time_ort(args, w: Workload, shapes, model: Path, iterations: int, warmup: int) -> Cell:
    """ONNX Runtime's own time for InferenceSession::Run (its profiler's model_run events); the
    wall time of session.run seen from Node, which adds the binding's output copies, goes in
    extra["node_median_ms"]."""
    ort_dtype = DTYPES[w.dtype][2]
    prefix = args.workdir / f"ort-profile-{os.getpid()}-{w.key}"
    job = {
        "model": str(model),
        "inputs": [{"name": n, "dtype": ort_dtype, "shape": s, "values": w.values}
                   for n, s in zip(input_names(w, shapes), shapes)],
        "outputs": [{"name": "y", "dtype": ort_dtype, "shape": output_shape(w, shapes)}],
        "threads": args.threads, "iterations": iterations, "warmup": warmup,
        "budget_s": args.budget, "prealloc": args.ort_prealloc,
        "profile_prefix": None if args.ort_node_time else str(prefix),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=args.workdir, delete=False) as f:
        json.dump(job, f)
    try:
        return _cell(_run_json([args.node, str(BENCH_DIR / "ort_time.mjs"), f.name],
                               cwd=BENCH_DIR))
    finally:
        os.unlink(f.name)
        for leftover in args.workdir.glob(prefix.name + "*"):
            leftover.unlink()


def time_python_peer(args, kind: str, w: Workload, shapes, iterations: int, warmup: int) -> Cell:
    job = {"op": w.op, "dtype": w.dtype, "shapes": shapes, "out_shape": output_shape(w, shapes),
           "axis": w.axis, "threads": args.threads, "iterations": iterations, "warmup": warmup,
           "budget_s": args.budget, "seed": 1, "values": w.values}
    return _cell(_run_json([args.python, str(Path(__file__).resolve()), "--worker", kind],
                           stdin=json.dumps(job), env=_peer_env()))


def time_ceilings(args, exe: Path | None, w: Workload, shapes, iterations: int,
                  warmup: int) -> tuple[Cell, Cell]:
    """The streaming kernel's time and a memcpy's of half the bytes it moves (one process, the
    same buffers), each the best of 1 and --threads threads."""
    if exe is None:
        return Cell(error="no ceiling timer"), Cell(error="no ceiling timer")
    nbytes, inputs = ceiling_shape(w, shapes)
    result = _run_json([str(exe), str(nbytes), str(inputs), str(args.threads), str(iterations),
                        str(warmup)])
    if "error" in result:
        return Cell(error=result["error"]), Cell(error=result["error"])
    cells = []
    for kind in ("stream", "memcpy"):
        threads, best = min(result[kind].items(), key=lambda kv: kv[1]["median_ms"])
        cells.append(Cell(ms=best["median_ms"],
                          extra=dict(best, threads=int(threads), isa=result["isa"],
                                     inputs=inputs)))
    return cells[0], cells[1]


def last_level_cache_bytes() -> int:
    """The size of cpu0's last-level cache (its highest cache index in sysfs), 8 MiB if unknown."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = entry.read_text().strip()
            sizes.append(int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}[text[-1]])
        except (OSError, ValueError, KeyError, IndexError):
            pass
    return max(sizes, default=8 << 20)


def in_cache_shapes(w: Workload, shapes: list[list[int]], budget: int) -> list[list[int]]:
    """The workload cut down so that its inputs and output move at most `budget` bytes: leading
    dimensions shrink first, so a row keeps its length (a 1-D scan gets shorter); a Sum's inputs of
    the output's shape all shrink alike, its broadcast inputs (a row, a scalar) stay."""
    out = output_shape(w, shapes)
    full = [numel(s) == numel(out) for s in shapes] if w.op == "Sum" else [True]
    elements = max(1, budget // (DTYPES[w.dtype][0] * (sum(full) + 1)))
    cut = list(out)
    for i in range(len(cut) - 1):
        cut[i] = max(1, min(cut[i], elements // numel(cut[i + 1:])))
    if len(cut) == 1:
        cut[0] = max(1, min(cut[0], elements))
    return [cut if f else s for s, f in zip(shapes, full)]


def time_in_cache(args, w: Workload, shapes, cap: str | None) -> Cell:
    """The same kernels on the same threads with the memory out of the way: bench_kernels --case
    on a cut of the workload that fits half the last-level cache (in_cache_shapes), its rate
    scaled to the whole workload as a time. ceiling ms / this time is the share of the ceiling
    the kernel's own work (its arithmetic, its passes over the data, its hand-offs between
    threads) allows; under 90%, that work, not the memory, is what bounds the row."""
    if args.bounds is None:
        return Cell(error="no --bounds")
    small = in_cache_shapes(w, shapes, last_level_cache_bytes() // 2)
    # The library names its types as PyTorch does (cumulus::dtype_name).
    spec = (f"{w.op}:{DTYPES[w.dtype][4]}:"
            + "+".join("x".join(map(str, s)) or "scalar" for s in small) + f":{w.axis}")
    cmd = [str(args.bounds), f"--case={spec}", f"--case_threads={args.threads}",
           f"--case_values={w.values}",
           "--benchmark_filter=^Case/", "--benchmark_format=json", "--benchmark_min_time=0.2",
           "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=cumulus_env(cap), timeout=300)
        rows = json.loads(r.stdout)["benchmarks"] if r.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
        return Cell(error=f"in-cache run: {e}")
    rates = [b["items_per_second"] for b in rows
             if b.get("aggregate_name") == "median" and "items_per_second" in b]
    if not rates:
        msg = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return Cell(error=f"in-cache run: {msg}")
    return Cell(ms=numel(output_shape(w, shapes)) / rates[0] * 1e3,
                extra={"case": spec, "per_s": rates[0]})


def best_of(cells: list[Cell]) -> Cell:
    """The faster of the runs before and after cumulus (the memory bandwidth of a shared host
    drifts from minute to minute), with both times in extra["before_after_ms"]."""
    timed = [c for c in cells if c.ms is not None]
    if not timed:
        return cells[0]
    best = min(timed, key=lambda c: c.ms)
    if len(timed) > 1:
        best.extra["before_after_ms"] = [c.ms for c in timed]
    return best


# ---- other processes' CPU use -------------------------------------------------------------------


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]) - idle, sum(fields[:8])


class CpuMeter:
    """CPU time used by other processes (all CPU time less this process and its children), in
    CPUs (1.0 = one core fully busy), between start() and stop()."""

    def __init__(self):
        self.hz = os.sysconf("SC_CLK_TCK")

    def start(self):
        self.t0, self.busy0, self.own0 = time.time(), _busy_jiffies()[0], self._own()

    def stop(self) -> float:
        wall = time.time() - self.t0
        busy = (_busy_jiffies()[0] - self.busy0) / self.hz
        own = self._own() - self.own0
        return max(0.0, busy - own) / wall if wall > 0 else 0.0

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system


def wait_until_idle(max_wait: float, threshold: float) -> float:
    """Waits (up to max_wait seconds) until other processes use less than `threshold` CPUs over
    one second; returns the last measurement."""
    meter = CpuMeter()
    deadline = time.time() + max_wait
    while True:
        meter.start()
        time.sleep(1.0)
        other = meter.stop()
        if other < threshold or time.time() >= deadline:
            return other
        print(f"  waiting: other processes use {other:.2f} CPUs", file=sys.stderr, flush=True)
        time.sleep(4.0)


# ---- the table ----------------------------------------------------------------------------------


def stale_binary(binary: Path) -> bool:
    if not binary.exists():
        return True
    built = binary.stat().st_mtime
    for d in ("src", "include", "tools"):
        for p in (REPO_DIR / d).rglob("*"):
            if p.is_file() and p.stat().st_mtime > built:
                return True
    return False


def fmt_ms(c: Cell | None) -> str:
    if c is None or c.ms is None:
        return "n/a"
    if c.ms >= 100:
        return f"{c.ms:.0f}"
    if c.ms >= 10:
        return f"{c.ms:.1f}"
    if c.ms >= 1:
        return f"{c.ms:.2f}"
    if c.ms <= 0:
        return "0"
    return f"{c.ms:.{2 - math.floor(math.log10(c.ms))}f}"  # three significant digits


def fmt_ratio(num: Cell | None, den: Cell | None, percent=False) -> str:
    if num is None or den is None or num.ms is None or den.ms is None or den.ms <= 0:
        return "n/a"
    r = num.ms / den.ms
    if percent:
        return f"{100 * r:.0f}%"
    return f"{r:.1f}x" if r >= 10 else f"{r:.2f}x"


PEERS = [("ort", "ORT"), ("numpy", "NumPy"), ("torch", "PyTorch")]
BASE_LABELS = dict(PEERS + [("ceiling", "ceiling"), ("memcpy", "memcpy")])


def cumulus_runs(isa: str | None) -> list[tuple[str, str | None, str]]:
    """(cell key, CUMULUS_ISA cap, column label) of each cumulus run; the first is "cumulus", the
    one the peers are compared with."""
    caps = {None: [None], "both": ["", "avx2"], "all": ["", "avx512", "avx2"]}.get(isa, [isa])
    return [("cumulus" if i == 0 else f"cumulus-{cap}", cap,
             f"cumulus {cap}" if cap else "cumulus") for i, cap in enumerate(caps)]


def render(rows, runs, header_lines, notes, bounds: bool) -> str:
    cols = ["workload", "MB moved", "ceiling ms", "memcpy ms"]
    for i, (_, _, label) in enumerate(runs):
        cols += [f"{label} ms", "% of ceiling" if i == 0 else f"{label} % of ceiling"]
        if bounds:
            cols.append(f"{label} in-cache cap")
    cols += (["cumulus GB/s", "% of memcpy"] + [f"{label} ms" for _, label in PEERS]
             + [f"vs {label}" for _, label in PEERS] + ["ORT via Node ms"])
    out = header_lines + ["", "| " + " | ".join(cols) + " |",
                          "|" + "|".join(["---"] + ["---:"] * (len(cols) - 1)) + "|"]
    for label, nbytes, cells in rows:
        cu = cells.get("cumulus")
        ceiling = cells.get("ceiling")
        gbps = f"{nbytes / (cu.ms * 1e6):.1f}" if cu and cu.ms else "n/a"
        vals = [label, f"{nbytes / 1e6:.1f}" if nbytes >= 1e6 else f"{nbytes / 1e6:.3f}",
                fmt_ms(ceiling), fmt_ms(cells.get("memcpy"))]
        for key, _, _ in runs:
            vals += [fmt_ms(cells.get(key)), fmt_ratio(ceiling, cells.get(key), percent=True)]
            if bounds:
                vals.append(fmt_ratio(ceiling, cells.get(f"{key}-cap"), percent=True))
        vals += [gbps, fmt_ratio(cells.get("memcpy"), cu, percent=True)]
        vals += [fmt_ms(cells.get(k)) for k, _ in PEERS]
        vals += [fmt_ratio(cells.get(k), cu) for k, _ in PEERS]
        ort = cells.get("ort")
        node_ms = ort.extra.get("node_median_ms") if ort is not None else None
        vals.append(fmt_ms(Cell(ms=node_ms)) if node_ms is not None else "n/a")
        out.append("| " + " | ".join(vals) + " |")
    if notes:
        out += ["", "Notes (n/a, capped runs, other load):", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def versions(args) -> dict:
    v = {}
    for kind, code in (("numpy", "import numpy; print(numpy.__version__)"),
                       ("torch", "import torch; print(torch.__version__)")):
        r = subprocess.run([args.python, "-c", code], capture_output=True, text=True)
        v[kind] = r.stdout.strip() if r.returncode == 0 else "not installed"
    try:
        pkg = json.loads((BENCH_DIR / "node_modules/onnxruntime-node/package.json").read_text())
        v["ort"] = pkg["version"]
    except OSError:
        v["ort"] = "not installed"
    return v


def describe_machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs"


def describe_commit() -> str:
    try:
        commit = subprocess.run(["git", "-C", str(REPO_DIR), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_DIR), "status", "--porcelain", "src",
                                "include"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"
    return commit + (" with uncommitted changes in src/ or include/" if dirty else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="threads for every runtime (default 2)")
    ap.add_argument("--iterations", type=int, default=10,
                    help="timed runs per workload (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    ap.add_argument("--small-iterations", type=int, default=200,
                    help="timed runs for the in-cache workloads (default 200, after 20 warm-up)")
    ap.add_argument("--budget", type=float, default=15.0,
                    help="seconds per peer per workload (default 15): a slow peer gets fewer "
                         "timed runs, at least 3")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a fast smoke run")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="only the workloads whose key or label contains TEXT (repeatable); "
                         "keys: " + ", ".join(w.key for w in WORKLOADS))
    ap.add_argument("--skip", action="append", default=[],
                    choices=["ceiling", "ort", "numpy", "torch"],
                    help="leave out a runtime (ceiling: the ceiling and memcpy timer)")
    ap.add_argument("--isa", choices=["avx512fp16", "avx512", "avx2", "scalar", "both", "all"],
                    help="run cumulus with CUMULUS_ISA set to this cap (the other runtimes and the "
                         "ceiling are not capped); both: one column with the best kernels this "
                         "CPU has and one capped at avx2; all: the best, avx512 and avx2 (default: "
                         "CUMULUS_ISA as inherited)")
    ap.add_argument("--workdir", type=Path,
                    default=Path(os.environ.get("CUMULUS_COMPARE_DIR", "/tmp/cumulus-compare")),
                    help="scratch directory for the generated models and the ceiling timer "
                         "(default $CUMULUS_COMPARE_DIR or /tmp/cumulus-compare)")
    ap.add_argument("--out", type=Path, help="also write the table to this file")
    ap.add_argument("--cumulus", type=Path, default=REPO_DIR / "build-rel" / "cumulus",
                    help="the cumulus binary (default build-rel/cumulus)")
    ap.add_argument("--build", action="store_true",
                    help="run `cmake --build build-rel --target cumulus` first")
    ap.add_argument("--python", default=SYSTEM_PYTHON,
                    help="Python with NumPy and PyTorch for the peers (default /usr/bin/python3)")
    ap.add_argument("--node", default=shutil.which("node") or "node", help="node for ONNX Runtime")
    ap.add_argument("--ort-prealloc", action="store_true",
                    help="give ONNX Runtime preallocated output tensors (default: it allocates "
                         "them, as cumulus perf does)")
    ap.add_argument("--ort-node-time", action="store_true",
                    help="report the wall time of session.run seen from Node as the ORT time "
                         "(default: ONNX Runtime's own profiler time for the run, which leaves out "
                         "the Node binding's copy of the outputs into JavaScript buffers)")
    ap.add_argument("--bounds", nargs="?", metavar="BENCH_KERNELS", const="",
                    help="also time each cumulus run's kernels on a cut of the workload that fits "
                         "the last-level cache (bench_kernels --case; default: bench/bench_kernels "
                         "beside --cumulus): the share of the ceiling their own work allows")
    ap.add_argument("--wait-idle", type=float, default=120.0, metavar="SECONDS",
                    help="before each workload, wait up to SECONDS for other processes to use "
                         "less than 0.25 CPUs (default 120; 0 to not wait)")
    ap.add_argument("--worker", choices=["numpy", "torch"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args.worker)
    if args.bounds is not None:
        args.bounds = Path(args.bounds) if args.bounds else (
            args.cumulus.parent / "bench" / "bench_kernels")
    if args.bounds is not None and not args.bounds.exists():
        print(f"error: {args.bounds} does not exist; build bench_kernels (see bench/README.md)",
              file=sys.stderr)
        return 1

    if args.build:
        subprocess.run(["cmake", "--build", str(args.cumulus.parent), "--target", "cumulus"],
                       check=True)
    if not args.cumulus.exists():
        print(f"error: {args.cumulus} does not exist; build it (see bench/README.md)",
              file=sys.stderr)
        return 1
    if stale_binary(args.cumulus):
        print(f"warning: {args.cumulus} is older than the sources; pass --build to rebuild it",
              file=sys.stderr)

    args.workdir.mkdir(parents=True, exist_ok=True)
    timer_exe = None if "ceiling" in args.skip else build_stream_timer(args.workdir)
    runs = cumulus_runs(args.isa)
    labels = dict(BASE_LABELS, **{key: label for key, _, label in runs},
                  **{f"{key}-cap": f"{label} in cache" for key, _, label in runs})
    workloads = [w for w in WORKLOADS
                 if not args.only or any(s.lower() in w.key.lower()
                                         or s.lower() in w.label(args.quick).lower()
                                         for s in args.only)]
    if not workloads:
        print("error: --only matched no workload", file=sys.stderr)
        return 2

    v = versions(args)
    load_before = os.getloadavg()
    started = time.time()
    commit = describe_commit()
    rows, notes, loads = [], [], []
    isas = {key: "?" for key, _, _ in runs}
    ceiling_isas: set[str] = set()
    for w in workloads:
        shapes = w.input_shapes(args.quick)
        label = w.label(args.quick)
        nbytes = moved_bytes(w, shapes)
        iterations = max(args.iterations, args.small_iterations) if w.small else args.iterations
        warmup = max(args.warmup, 20) if w.small else args.warmup
        model = args.workdir / (
            f"{w.op.lower()}_{w.dtype}_{'_'.join('x'.join(map(str, s)) or 'scalar' for s in shapes)}"
            f"_axis{w.axis}.onnx")
        build_model(w, shapes, model)
        if args.wait_idle > 0:
            wait_until_idle(args.wait_idle, 0.25)
        print(f"[{time.strftime('%H:%M:%S')}] {label}: {nbytes / 1e6:.1f} MB moved",
              file=sys.stderr, flush=True)
        cells: dict[str, Cell] = {}
        meter = CpuMeter()
        meter.start()
        # The ceilings right before and right after cumulus (the memory bandwidth of a shared
        # host drifts from minute to minute); the faster of the two counts.
        ceilings = "ceiling" not in args.skip
        if ceilings:
            before = time_ceilings(args, timer_exe, w, shapes, iterations, warmup)
        for key, cap, _ in runs:
            cells[key] = time_cumulus(args, w, shapes, model, iterations, warmup, cap)
            isas[key] = cells[key].extra.get("isa", isas[key])
            if cap and cells[key].ms is not None and isas[key] != cap:
                notes.append(f"{label}, {labels[key]}: CUMULUS_ISA={cap} ran the "
                             f"{isas[key]} kernels")
        if ceilings:
            after = time_ceilings(args, timer_exe, w, shapes, iterations, warmup)
            cells["ceiling"] = best_of([before[0], after[0]])
            cells["memcpy"] = best_of([before[1], after[1]])
            if "isa" in cells["ceiling"].extra:
                ceiling_isas.add(cells["ceiling"].extra["isa"])
        if ceilings and w.small:
            # Streaming stores write past the cache; a cached copy is the bound in cache.
            memcpy = cells["memcpy"]
            cells["ceiling"] = Cell(ms=memcpy.ms, error=memcpy.error,
                                    extra=dict(memcpy.extra, kind="memcpy"))
        if args.bounds is not None and not w.small:
            for key, cap, _ in runs:
                cells[f"{key}-cap"] = time_in_cache(args, w, shapes, cap)
        if "ort" not in args.skip:
            cells["ort"] = time_ort(args, w, shapes, model, iterations, warmup)
        for kind in ("numpy", "torch"):
            if kind not in args.skip:
                cells[kind] = time_python_peer(args, kind, w, shapes, iterations, warmup)
        other = meter.stop()
        loads.append(other)
        for key, c in cells.items():
            if c.error:
                notes.append(f"{label}, {labels[key]}: {c.error}")
            if c.extra.get("profile_error"):
                notes.append(f"{label}, {labels[key]}: {c.extra['profile_error']}; "
                             "its time is the Node wall time")
            if c.ms is not None and c.extra.get("iterations", iterations) < iterations:
                notes.append(f"{label}, {labels[key]}: {c.extra['iterations']} timed runs "
                             f"(capped at ~{args.budget:.0f} s)")
        if other >= 0.1:
            notes.append(f"{label}: other processes used {other:.2f} CPUs on average while it "
                         "ran; its times may be disturbed")
        drift = cells.get("ceiling", Cell()).extra.get("before_after_ms")
        print("  " + "  ".join(f"{labels[k]} {fmt_ms(c)}" for k, c in cells.items())
              + (f"  (ceiling before/after {drift[0]:.3g}/{drift[1]:.3g})" if drift else "")
              + f"  (other processes: {other:.2f} CPUs)", file=sys.stderr, flush=True)
        rows.append((label, nbytes, cells))

    header = [
        f"cumulus comparison, {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}"
        f"{' (--quick sizes)' if args.quick else ''}",
        "",
        f"- machine: {describe_machine()}; load average {load_before[0]:.2f} at the start; "
        f"other processes used {max(loads):.2f} CPUs at most during a workload "
        f"({(time.time() - started) / 60:.1f} min in all)",
        f"- threads: {args.threads} for every runtime (NumPy is single-threaded); median of "
        f"{args.iterations} runs after {args.warmup} warm-up runs ({args.small_iterations} after "
        f"{max(args.warmup, 20)} for the in-cache rows), at most ~{args.budget:.0f} s per peer "
        "per workload",
        f"- cumulus {commit}, "
        + ", ".join(f"{label}: {isas[key]} kernels" for key, cap, label in runs)
        + (" (CUMULUS_ISA for cumulus only)" if args.isa else "")
        + f"; ONNX Runtime {v['ort']} (onnxruntime-node, "
        f"{'preallocated' if args.ort_prealloc else 'allocating'} outputs; ORT ms: "
        f"{'wall time of session.run in Node' if args.ort_node_time else 'its profiler model_run'}"
        "); "
        f"NumPy {v['numpy']}; PyTorch {v['torch']}",
        "- MB moved: input plus output bytes; "
        + ("ceiling and memcpy: left out (--skip ceiling); " if "ceiling" in args.skip else
           "ceiling: the streaming kernel of the same bytes "
           f"(non-temporal stores, asking 8 KiB ahead, on huge pages, the fastest vector width: "
           f"{', '.join(sorted(ceiling_isas)) or '?'}; a scan: a copy of its input, a Sum of K "
           "inputs of the output's size: a K-input add), for the in-cache rows a memcpy; memcpy: a copy "
           f"of half of the bytes; each the best of 1 and {args.threads} threads, timed just "
           "before and just after cumulus, the faster of the two; ")
        + "% of ceiling = ceiling ms / cumulus ms; % of memcpy = memcpy ms / cumulus ms; "
        "vs X = X ms / cumulus ms (above 1x: cumulus is faster)",
    ]
    if args.bounds is not None:
        header.append(
            "- in-cache cap: ceiling ms / the time of the same kernels on the same threads with "
            "the working set in the last-level cache (bench_kernels --case on a cut of the "
            f"workload moving at most {last_level_cache_bytes() // 2 >> 20} MiB, leading "
            "dimensions shrunk first), scaled to the whole workload: the share of the ceiling "
            "the kernels' own work allows; under 90%, that work bounds the row, not the memory")
    table = render(rows, runs, header, notes, args.bounds is not None)
    sys.stdout.write(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
