"""Timer cross-check: the same workload timed by every GPU timer, and a verdict on their spread.

A timer that reads 10x high on a microsecond kernel is the classic timing dispute. This module
times one solution call per workload with each available method in one process, on the same
inputs, and compares them with what the methods are expected to differ by:

- ``profiler`` and ``cupti`` measure the same device span (first kernel start to last kernel
  end); they must agree within :data:`REL_TOL` (or :data:`ABS_TOL_US` for tiny kernels).
- ``events`` (CUDA events around the call) adds the host's launch time where it outlasts the
  L2 flush queued before the call: it may read above the span by up to
  ``EVENTS_BASE_US + PER_KERNEL_US * kernels`` (the launch-overhead model). It may read below
  the span (the profiler slows the host's launches, so a host-bound call's gaps between
  kernels grow under it), but never below the kernels' own busy time.
- ``graph`` (ten (flush, call) pairs captured in one CUDA graph, minus a graph of the flushes
  alone, per call) has no host launch and no host gaps between kernels: from the busy time up
  to the span plus ``GRAPH_BASE_US``.

The busy time is the sum of the call's kernel durations (profiled with warm caches, so a lower
bound). When the span exceeds it by much, the GPU waits for the host between kernels; the row's
``note`` says how long. The overhead constants come from the five starters on an H100.

The span (``profiler``, else ``cupti``) is the reference the ratios are taken against. The
timers themselves are those of :mod:`fib_core.bench.evaluation.timers`; only the graph replay is timed
here. Runs in a child process: the solution is untrusted code, and a crash there must not take
the finished benchmark with it.

Example (what ``run_local.py --cross-check`` measures, per workload; the table it prints is
:func:`fib_core.project.cross_check_table.print_cross_check`'s)::

    rows, notes = cross_check_shard(request, workload_traces, "cuda", dataset_path)
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import statistics
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fib_core.bench.evaluation.timer_methods import profiler_session
from fib_core.bench.evaluation.timers import (
    L2Flusher,
    available_methods,
    cupti_unavailable_reason,
    measure,
)
from fib_core.compile import BuildOptions
from fib_core.compile.build import build as build_solution

METHODS = ("profiler", "cupti", "events", "graph")
SPAN_METHODS = ("profiler", "cupti")
REL_TOL = 0.10  # relative disagreement allowed between methods measuring the same span
ABS_TOL_US = 2.0  # ... and an absolute floor for microsecond kernels
EVENTS_BASE_US = 8.0  # one launch plus event records, seen from the stream
PER_KERNEL_US = 4.0  # each further kernel launch the host makes
GRAPH_BASE_US = 5.0  # graph node launches inside a replay, per call
GRAPH_CALLS = 10  # (flush, call) pairs per graph: the host's launch is paid once for all
HOST_GAP_FRACTION = 0.2  # a span this much above the busy time is worth a note
DEFAULT_WARMUP = 5
DEFAULT_ITERATIONS = 30
CHILD_TIMEOUT_S = 120.0  # per workload
MODEL_NOTE = (
    "The kit reports the device span (profiler, or CUPTI). CUDA events also count the host's "
    "launch time where it outlasts the L2 flush before the call: allowed up to "
    f"{EVENTS_BASE_US:.0f} us + {PER_KERNEL_US:.0f} us per kernel over the span; a graph "
    f"replay up to {GRAPH_BASE_US:.0f} us over it; neither below the kernels' busy time; "
    f"all within {REL_TOL:.0%} (at least {ABS_TOL_US:.0f} us)."
)
NEEDS_GPU = (
    "--cross-check needs a CUDA GPU (it compares the GPU timers: CUPTI, profiler span, "
    "CUDA events, CUDA-graph replay); skipped on this CPU run"
)


@dataclass
class CrossCheckRow:
    """One workload's latency (median ms) per timing method, and the verdict.

    ``unavailable`` maps a method to why it has no figure (no CUPTI module, capture failed...).
    ``flagged`` is True when some method lies outside the launch-overhead model; ``reason``
    says which and by how much.
    """

    uuid: str
    axes: dict[str, int]
    latencies_ms: dict[str, float] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    kernels: int | None = None
    reference: str | None = None
    flagged: bool = False
    reason: str = ""
    busy_ms: float | None = None  # sum of the call's kernel durations (warm caches)
    note: str = ""  # e.g. how much of the span is the GPU waiting for the host

    def __post_init__(self) -> None:
        for name, value in self.latencies_ms.items():
            if name not in METHODS:
                raise ValueError(f"CrossCheckRow: unknown method {name!r}, expected {METHODS}")
            if not isinstance(value, int | float) or value <= 0:
                raise ValueError(
                    f"CrossCheckRow.latencies_ms[{name}]: found {value!r}, expected > 0"
                )

    def ratios(self) -> dict[str, float]:
        """Each method's latency divided by the reference method's (1.0 = agrees)."""
        if self.reference is None or self.reference not in self.latencies_ms:
            return {}
        ref = self.latencies_ms[self.reference]
        return {m: v / ref for m, v in self.latencies_ms.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "axes": dict(self.axes),
            "latencies_ms": dict(self.latencies_ms),
            "unavailable": dict(self.unavailable),
            "kernels": self.kernels,
            "reference": self.reference,
            "flagged": self.flagged,
            "reason": self.reason,
            "busy_ms": self.busy_ms,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CrossCheckRow:
        return cls(
            uuid=d["uuid"],
            axes=dict(d.get("axes") or {}),
            latencies_ms={k: float(v) for k, v in (d.get("latencies_ms") or {}).items()},
            unavailable=dict(d.get("unavailable") or {}),
            kernels=d.get("kernels"),
            reference=d.get("reference"),
            flagged=bool(d.get("flagged")),
            reason=d.get("reason") or "",
            busy_ms=d.get("busy_ms"),
            note=d.get("note") or "",
        )


def allowed_excess_us(method: str, kernels: int | None) -> float:
    """How far above the device span ``method`` may read (µs), by the launch-overhead model."""
    if method == "events":
        return EVENTS_BASE_US + PER_KERNEL_US * max(1, kernels or 1)
    if method == "graph":
        return GRAPH_BASE_US
    return 0.0


def judge(
    latencies_ms: dict[str, float], kernels: int | None, busy_ms: float | None = None
) -> tuple[str | None, bool, str]:
    """(reference method, flagged, reason) for one workload's figures.

    The two span timers must agree within the tolerance. Events and the graph replay must lie
    between the busy time (the span when it is unknown; no floor for the graph then) minus the
    tolerance, and the span plus the tolerance plus their launch-overhead allowance.
    """
    reference = next((m for m in SPAN_METHODS if m in latencies_ms), None)
    if reference is None:
        return None, False, "no device-span timer: nothing to check against"
    ref_us = latencies_ms[reference] * 1e3
    slack_us = max(REL_TOL * ref_us, ABS_TOL_US)
    busy_us = min(busy_ms * 1e3, ref_us) if busy_ms else None
    problems = []
    for method, ms in latencies_ms.items():
        if method == reference:
            continue
        us = ms * 1e3
        high = ref_us + slack_us + allowed_excess_us(method, kernels)
        if method in SPAN_METHODS:
            floor_us, what = ref_us, f"the {reference} span of {ref_us:.1f} us"
        elif busy_us is not None:
            floor_us, what = busy_us, f"the kernels' busy time of {busy_us:.1f} us"
        elif method == "events":
            floor_us, what = ref_us, f"the {reference} span of {ref_us:.1f} us"
        else:
            floor_us, what = None, ""
        if us > high:
            problems.append(
                f"{method} reads {us:.1f} us, {us - ref_us:+.1f} us over the {reference} span "
                f"of {ref_us:.1f} us (model allows {high - ref_us:.1f})"
            )
        elif floor_us is not None and us < floor_us - max(REL_TOL * floor_us, ABS_TOL_US):
            problems.append(f"{method} reads {us:.1f} us, below {what}")
    return reference, bool(problems), "; ".join(problems)


def host_gap_note(span_ms: float | None, busy_ms: float | None, graph_ms: float | None) -> str:
    """A line when much of the span is the GPU idle between kernels, waiting for the host."""
    if not span_ms or not busy_ms or busy_ms >= span_ms:
        return ""
    gap = span_ms - busy_ms
    if gap < HOST_GAP_FRACTION * span_ms or gap * 1e3 < ABS_TOL_US:
        return ""
    text = (
        f"{gap * 1e3:.1f} us of the {span_ms * 1e3:.1f} us span is the GPU waiting for the host "
        f"between kernels (kernels busy {busy_ms * 1e3:.1f} us)"
    )
    if graph_ms:
        text += f"; replayed as a CUDA graph the call takes {graph_ms * 1e3:.1f} us"
    return text


def cross_check_shard(
    request: Any, workload_traces: list[Any], device: str, dataset_path: str | Path
) -> tuple[list[dict[str, Any]], list[str]]:
    """Cross-check this shard's workloads; (row dicts, notes). On CPU: no rows, one note."""
    if device != "cuda":
        return [], [NEEDS_GPU]
    if not workload_traces:
        return [], []

    settings = dict(request.engine)
    job = {
        "solution": request.solution,
        "definition": request.definition,
        "build": dict(request.build),
        "seed": int(settings.get("seed", 0)),
        "warmup": min(int(settings.get("warmup_runs", DEFAULT_WARMUP)), 10),
        "iterations": int(settings.get("iterations", DEFAULT_ITERATIONS)),
        "dataset_path": str(dataset_path),
        "workloads": [t.workload.to_dict() for t in workload_traces],
    }
    timeout = CHILD_TIMEOUT_S * len(workload_traces) + 60.0
    ctx = multiprocessing.get_context("spawn")
    try:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
            return pool.submit(run_cross_check, job).result(timeout=timeout), []
    except concurrent.futures.TimeoutError:
        return [], [f"cross-check gave no answer within {timeout:.0f} s; skipped"]
    except Exception as err:  # the child died or raised: report, keep the benchmark
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return [], [f"cross-check failed: {first}"]


def run_cross_check(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Child-process body: build once, then time every workload with every method."""
    # Imported here: fib_core.data loads pydantic (~50 ms); this module's import does not.
    from fib_core.data import Solution, TraceSet
    from fib_core.data.workload import Workload

    warnings.filterwarnings("ignore", message="Profiler clears events")  # one profile per call
    trace_set = TraceSet.from_path(job["dataset_path"])
    definition = trace_set.definitions[job["definition"]]
    solution = Solution.from_dict(job["solution"])
    runnable = build_solution(solution, definition, BuildOptions(**job["build"]))
    flusher = L2Flusher("cuda")
    rows = []
    for wd in job["workloads"]:
        workload = Workload.from_dict(wd)
        row = _check_workload(runnable, definition, workload, job, flusher)
        rows.append(row.to_dict())
    return rows


def _check_workload(runnable, definition, workload, job, flusher) -> CrossCheckRow:
    """One workload's row: the call timed by each timer and replayed as a CUDA graph, its
    kernels profiled, and the verdict on the timers' spread."""
    call = _solution_call(runnable, definition, workload, job)
    row = CrossCheckRow(uuid=workload.uuid, axes=dict(workload.axes))
    _time_with_each_timer(row, call, job, flusher)
    try:
        row.latencies_ms["graph"] = time_graph_replay(
            call, flusher, job["warmup"], job["iterations"]
        )
    except Exception as err:  # noqa: BLE001 - a solution that cannot be captured is common
        row.unavailable["graph"] = "CUDA-graph capture failed: " + _first_line(err)
    row.kernels, row.busy_ms = profile_call(call)
    row.reference, row.flagged, row.reason = judge(row.latencies_ms, row.kernels, row.busy_ms)
    span = row.latencies_ms.get(row.reference) if row.reference else None
    row.note = host_gap_note(span, row.busy_ms, row.latencies_ms.get("graph"))
    return row


def _solution_call(runnable, definition, workload, job) -> Callable[[int], None]:
    """The solution called on the workload's inputs (made once, on the GPU), writing into
    outputs allocated once when it takes them (destination passing)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    # Imported here: fib_core.bench.evaluation.inputs loads pydantic (~50 ms); this module's import does not.
    from fib_core.bench.evaluation.inputs import generate_inputs
    from fib_core.data.dtypes import torch_dtype

    inputs = generate_inputs(
        definition, workload, seed=job["seed"], device="cuda", dataset_root=job["dataset_path"]
    )
    outputs = None
    if runnable.dps:
        shapes = definition.output_shapes(dict(workload.axes))
        outputs = [
            None
            if shapes[n] is None
            else torch.empty(shapes[n], dtype=torch_dtype(s.dtype), device="cuda")
            for n, s in definition.outputs.items()
        ]

    def call(_i: int) -> None:
        runnable.run(inputs, outputs)

    return call


def _time_with_each_timer(row: CrossCheckRow, call: Callable[[int], None], job: dict[str, Any],
                          flusher: Any) -> None:
    """Time ``call`` with the profiler, CUPTI and CUDA events into ``row.latencies_ms``; a
    timer that is missing, fails or falls back to another is named in ``row.unavailable``."""
    def prepare(_i: int) -> None:
        return None

    usable = available_methods("cuda")
    for method in ("profiler", "cupti", "events"):
        if method not in usable:
            row.unavailable[method] = (
                (cupti_unavailable_reason() or "not available") if method == "cupti" else "not available"
            )
            continue
        try:
            result = measure(
                call,
                prepare,
                device="cuda",
                method=method,
                warmup=job["warmup"],
                iterations=job["iterations"],
                trials=1,
                flusher=flusher,
            )
        except Exception as err:  # noqa: BLE001 - one timer failing must not hide the others
            row.unavailable[method] = _first_line(err)
            continue
        if result.method != method:  # the timer fell back (e.g. no profiler span)
            row.unavailable[method] = f"fell back to {result.method}"
            continue
        row.latencies_ms[method] = result.latency_ms


def time_graph_replay(call, flusher, warmup: int, iterations: int) -> float:
    """Per-call ms of ``call`` replayed from a CUDA graph, L2 flushed before each call.

    One graph holds :data:`GRAPH_CALLS` pairs of (flush, call), another the flushes alone; the
    difference of their median replay times, divided by the pairs, is the call's device time
    with cold caches and no host launch in it (the host submits each graph once).
    """
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(1, warmup)):
            call(0)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    with_calls, flushes_only = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(with_calls):
        for _ in range(GRAPH_CALLS):
            flusher()
            call(0)
    with torch.cuda.graph(flushes_only):
        for _ in range(GRAPH_CALLS):
            flusher()
    torch.cuda.synchronize()
    replays = max(3, iterations // 5)
    both = _median_replay_ms(with_calls, replays)
    flush = _median_replay_ms(flushes_only, replays)
    per_call = (both - flush) / GRAPH_CALLS
    if per_call <= 0:
        raise RuntimeError(f"graph replay time not above the flushes alone ({both:.4f} ms)")
    return per_call


def _median_replay_ms(graph, replays: int) -> float:
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    begin = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    graph.replay()  # first replay uploads the graph
    for k in range(replays):
        begin[k].record()
        graph.replay()
        end[k].record()
    torch.cuda.synchronize()
    return statistics.median(b.elapsed_time(e) for b, e in zip(begin, end, strict=True))


def profile_call(call, repeats: int = 3) -> tuple[int | None, float | None]:
    """(device activities per call, their summed duration in ms) from the profiler.

    Kernels, copies and memsets all count; caches stay warm between the calls, so the busy
    time is a lower bound of what a cold call keeps the GPU busy.
    """
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    try:
        torch.cuda.synchronize()
        with profiler_session(cpu=False) as prof:
            for _ in range(repeats):
                call(0)
            torch.cuda.synchronize()
        device = [e for e in prof.function_events if str(e.device_type).endswith("CUDA")]
        if not device:
            return None, None
        busy_us = sum(e.time_range.elapsed_us() for e in device) / repeats
        return max(1, round(len(device) / repeats)), busy_us / 1e3
    except Exception:  # noqa: BLE001 - the figures only refine the model
        return None, None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__
