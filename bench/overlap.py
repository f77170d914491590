#!/usr/bin/env python3
"""What a core spends on a compare.py workload: its arithmetic, its memory traffic, or both.

For each workload named, times with 1 and with 2 threads, ROUNDS rounds alternated:
  - the row from memory (`cumulus perf`, 7 runs, as compare.py times it),
  - its streaming ceiling (bench/stream_timer.cc: the non-temporal copy or K-input add of its
    bytes),
  - the same kernels in cache, scaled to the whole workload (`bench_kernels --case` on
    compare.py's in-cache cut, as `compare.py --bounds` runs it),
and prints one JSON line per workload with the medians and ranges. A row whose time is near the
sum of its copy and its in-cache time overlaps neither; near the larger of the two, fully.

  python3 bench/overlap.py --isa avx512 --rounds 3 cumsum-f32-short-rows sum-3

Needs build/cumulus and build/bench/bench_kernels (-DCUMULUS_BUILD_BENCH=ON) and the models
compare.py writes (run compare.py once with the same --workdir first, or --only those rows).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import compare  # noqa: E402  (the workloads, their models and cuts)


def run_json(cmd: list[str], env: dict | None = None) -> dict:
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="+", help="compare.py workload keys")
    ap.add_argument("--isa", default=None, help="CUMULUS_ISA for cumulus and bench_kernels")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/cumulus-compare"))
    ap.add_argument("--cumulus", type=Path, default=BENCH_DIR.parent / "build" / "cumulus")
    ap.add_argument("--bench-kernels", type=Path,
                    default=BENCH_DIR.parent / "build" / "bench" / "bench_kernels")
    args = ap.parse_args()
    known = {w.key: w for w in compare.WORKLOADS}
    for key in args.workloads:
        if key not in known:
            ap.error(f"unknown workload {key!r}; keys: {', '.join(known)}")
    env = dict(os.environ)
    if args.isa:
        env["CUMULUS_ISA"] = args.isa
    timer = compare.build_stream_timer(args.workdir)
    if timer is None:
        raise SystemExit("could not build stream_timer")

    for key in args.workloads:
        w = known[key]
        shapes = w.input_shapes(False)
        model = args.workdir / (
            f"{w.op.lower()}_{w.dtype}_{'_'.join('x'.join(map(str, s)) or 'scalar' for s in shapes)}"
            f"_axis{w.axis}.onnx")
        compare.build_model(w, shapes, model)
        small = compare.in_cache_shapes(w, shapes, compare.last_level_cache_bytes() // 2)
        case = (f"{w.op}:{compare.DTYPES[w.dtype][4]}:"
                + "+".join("x".join(map(str, s)) or "scalar" for s in small) + f":{w.axis}")
        out_bytes, inputs = compare.ceiling_shape(w, shapes)
        elements = compare.numel(compare.output_shape(w, shapes))

        def row(threads: int) -> float:
            cmd = [str(args.cumulus), "perf", str(model), "-n", "7", "--warmup", "2",
                   "--threads", str(threads), "--json", "--seed", "1"]
            for name, shape in zip(compare.input_names(w, shapes), shapes):
                cmd += ["--input", f"{name}={compare._input_spec(shape, w.values)}"]
            return run_json(cmd, env)["median_ms"]

        def in_cache(threads: int) -> float:
            cmd = [str(args.bench_kernels), f"--case={case}", f"--case_threads={threads}",
                   f"--case_values={w.values}", "--benchmark_filter=^Case/",
                   "--benchmark_format=json", "--benchmark_min_time=0.2",
                   "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"]
            rows = run_json(cmd, env)["benchmarks"]
            rate = [b["items_per_second"] for b in rows if b.get("aggregate_name") == "median"]
            return elements / rate[0] * 1e3

        got: dict[str, list[float]] = {k: [] for k in
                                       ("row1", "row2", "copy1", "copy2", "cache1", "cache2")}
        for _ in range(args.rounds):
            got["row2"].append(row(2))
            got["row1"].append(row(1))
            ceiling = run_json([str(timer), str(out_bytes), str(inputs), "2", "7", "2"])
            got["copy1"].append(ceiling["stream"]["1"]["median_ms"])
            got["copy2"].append(ceiling["stream"]["2"]["median_ms"])
            got["cache1"].append(in_cache(1))
            got["cache2"].append(in_cache(2))
        medians = {k: statistics.median(v) for k, v in got.items()}
        print(json.dumps({
            "workload": key, "isa": args.isa or "best", "case": case,
            **{k: round(v, 2) for k, v in medians.items()},
            "row_over_sum": {t: round(medians[f"row{t}"] /
                                      (medians[f"copy{t}"] + medians[f"cache{t}"]), 3)
                             for t in ("1", "2")},
            "ranges": {k: [round(min(v), 2), round(max(v), 2)] for k, v in got.items()},
        }), flush=True)


if __name__ == "__main__":
    main()
