"""Build-time and call-overhead figures for fib_core.compile.

Prints, for the CUDA tvm-ffi example solution (tests/compile/fixtures/cuda_tvm):
- first build into an empty cache (nvcc + link), cached rebuild in the same process, and the
  build() call of a fresh process that finds the cache (what an isolated worker pays);
- host time per call of the raw entry function vs ``Runnable.__call__`` vs ``Runnable.run``
  on tiny tensors, i.e. the wrapper's overhead (kernel launches are asynchronous, so this is
  launch + wrapper time, not kernel time).

Without a GPU the CUDA example is only compiled (``--cuda-arch`` required) and the call
overhead is measured on the C++ example with CPU tensors.

    python benchmarks/bench_build.py [--cuda-arch sm_90a] [--calls 20000]
    python benchmarks/bench_build.py --quick   # the C++ example only, 200 calls (CI smoke)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "compile" / "fixtures"
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from fib_core.compile import BuildOptions, build  # noqa: E402
from fib_core.data import Definition, Solution  # noqa: E402

_CHILD = """
import json, sys, time
sys.path.insert(0, {repo!r})
import torch
from fib_core.compile import BuildOptions, build
from fib_core.data import Definition, Solution
sol = Solution.from_dict(json.loads(sys.argv[1]))
definition = Definition.from_dict(json.loads(sys.argv[2]))
start = time.perf_counter()
runnable = build(sol, definition, BuildOptions(cache_dir=sys.argv[3], cuda_arch=sys.argv[4] or None))
print(json.dumps({{"seconds": time.perf_counter() - start, "cached": runnable.meta["cached"]}}))
"""


def example(folder: str, language: str, entry: str) -> Solution:
    root = FIXTURES / folder
    sources = [{"path": p.relative_to(root).as_posix(), "content": p.read_text()}
               for p in sorted(root.rglob("*")) if p.is_file()]
    return Solution.from_dict({
        "name": folder, "definition": "fib_toy_axpby", "author": "bench",
        "spec": {"language": language, "target_hardware": ["H100", "B200"], "entry_point": entry},
        "sources": sources,
    })


def timed_build(sol: Solution, definition: Definition, options: BuildOptions):
    start = time.perf_counter()
    runnable = build(sol, definition, options)
    return runnable, time.perf_counter() - start


def fresh_process_build(sol: Solution, definition: Definition, cache: Path, arch: str) -> dict:
    code = _CHILD.format(repo=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(sol.to_dict()), json.dumps(definition.to_dict()),
         str(cache), arch],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def per_call_us(fn, calls: int, sync, rounds: int = 5) -> float:
    """Best of ``rounds`` averages: host noise only ever adds time."""
    for _ in range(100):
        fn()
    sync()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-arch", default=None, help="e.g. sm_90a; default: detect the GPU")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--quick", action="store_true",
                        help="skip the CUDA example; time the C++ example's calls only")
    args = parser.parse_args()
    if args.quick:
        args.calls = min(args.calls, 200)
    definition = Definition.from_dict(json.loads((FIXTURES / "toy_axpby.json").read_text()))
    gpu = torch.cuda.is_available() and not args.quick
    arch = args.cuda_arch or ""
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="fib-bench-") as tmp:
        cache = Path(tmp)
        options = BuildOptions(cache_dir=cache, cuda_arch=args.cuda_arch)
        again = None
        if not args.quick:
            cuda_sol = example("cuda_tvm", "cuda", "kernel.cu::run")
            first, t_first = timed_build(cuda_sol, definition, options)
            first.close()
            again, t_again = timed_build(cuda_sol, definition, options)
            child = fresh_process_build(cuda_sol, definition, cache, arch)
            rows += [
                ("CUDA example (tvm-ffi), first build", f"{t_first:.2f} s"),
                ("  cached rebuild, same process",
                 f"{t_again * 1e3:.1f} ms (cached={again.meta['cached']})"),
                ("  cached rebuild, fresh process (build() only)",
                 f"{child['seconds'] * 1e3:.1f} ms (cached={child['cached']})"),
                ("  target", ", ".join(again.meta["archs"])),
            ]
        if gpu and again is not None:
            runnable, device, sync = again, "cuda", torch.cuda.synchronize
        else:
            if again is not None:
                again.close()
            runnable, t_cpp = timed_build(example("cpp_tvm", "cpp", "kernel.cpp::run"),
                                          definition, options)
            rows.append(("C++ example (tvm-ffi), first build", f"{t_cpp:.2f} s"))
            device, sync = "cpu", (lambda: None)
        x = torch.randn(1024, device=device)
        y = torch.randn(1024, device=device)
        out, neg = torch.empty_like(x), torch.empty_like(x)
        inputs, outputs = [x, y, 0.5, 3], [out, neg]
        raw = runnable.fn
        t_raw = per_call_us(lambda: raw(x, y, 0.5, 3, out, neg), args.calls, sync)
        t_call = per_call_us(lambda: runnable(x, y, 0.5, 3, out, neg), args.calls, sync)
        t_run = per_call_us(lambda: runnable.run(inputs, outputs), args.calls, sync)
        what = f"{runnable.solution.name} on {device}, n=1024"
        rows += [
            (f"per call, raw fn ({what})", f"{t_raw:.2f} us"),
            ("per call, Runnable(*args)", f"{t_call:.2f} us (+{t_call - t_raw:.2f})"),
            ("per call, Runnable.run(inputs, outputs)", f"{t_run:.2f} us (+{t_run - t_raw:.2f})"),
        ]
        runnable.close()
    device_name = torch.cuda.get_device_name() if gpu else "CPU only"
    print(f"\nfib_core.compile build/call figures ({device_name}, torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs)")
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
