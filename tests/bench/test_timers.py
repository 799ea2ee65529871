"""Every GPU timer of ``fib_core.bench.evaluation.timers``, driven on CPU by a simulated GPU.

The simulated GPU has a host clock and a device timeline in nanoseconds. Each launch is an API
call on the host (taking ``LAUNCH_NS``) whose kernel starts when both the host has launched it
and the device is free; a synchronize moves the host clock to the device's end. The fakes of
CUPTI (runtime/driver and kernel records with correlation ids, host timestamps), torch's
profiler (kineto records: a GPU-side annotation per marked range and the kernels) and CUDA
events report what the real ones would. Each test asserts what the judge's protocol must give
on that timeline: the span from the first kernel's start to the last one's end with the host's
launch gaps inside it, the busy time, the order of flushes, synchronizes and calls, and the
fallbacks with the one line that says why.
"""

from __future__ import annotations

import time
import types
from contextlib import contextmanager

import pytest
import torch

from fib_core.bench.evaluation import timers
from fib_core.bench.evaluation.timer_methods import (
    EVENTS_WARNING,
    FALLBACK_NOTE,
    CallTiming,
    NoDeviceWork,
    judge_calls,
)
from fib_core.bench.evaluation.timers import (
    L2Flusher,
    available_methods,
    choose_method,
    launch_bound_note,
    measure,
)
from fib_core.bench.timing import time_runnable

LAUNCH_NS = 4_000  # host time of one launch API call


class FakeGpu:
    """Host clock, device timeline, and the records CUPTI and kineto would keep."""

    def __init__(self) -> None:
        self.host = 1_000_000
        self.device_free = 0
        self.next_corr = 100
        self.launches: list[tuple[int, int]] = []  # (API start, correlation id)
        self.kernels: list[tuple[int, int, int, str]] = []  # (corr, start, end, name)
        self.log: list[str] = []

    def launch(self, duration_ns: int, host_gap_ns: int = 0, name: str = "k") -> None:
        self.host += host_gap_ns
        corr = self.next_corr
        self.next_corr += 1
        self.launches.append((self.host, corr))
        self.host += LAUNCH_NS
        start = max(self.host, self.device_free)
        self.device_free = start + duration_ns
        self.kernels.append((corr, start, self.device_free, name))

    def sync(self) -> None:
        self.log.append("sync")
        self.host = max(self.host, self.device_free)


def plan_call(gpu: FakeGpu, plan: dict[int, list[tuple[int, int]]]):
    """Call i launches the (duration, host gap before) kernels ``plan[i % len(plan)]``."""

    def call(i: int) -> None:
        gpu.log.append(f"call{i}")
        for k, (duration, gap) in enumerate(plan[i % len(plan)]):
            gpu.launch(duration, gap, name=f"k{k}")

    return call


# Call 0: a 10 us kernel, 20 us of host work, a 6 us kernel; call 1: one 3 us kernel.
TWO_KERNELS = {0: [(10_000, 0), (6_000, 20_000)], 1: [(3_000, 0)]}
# Call 0's span: kernel A runs 10 us after its launch; B is launched 24 us after A's launch
# (20 us gap + A's launch), starts 4 us later: 10 + 20 + 4 - 10 + ... = 30 us from A's start.
SPAN0_MS, BUSY0_MS = 0.030, 0.016
SPAN1_MS = 0.003


def install_fake_sync(monkeypatch, gpu: FakeGpu) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: gpu.sync())


def make_fake_cupti(gpu: FakeGpu, fail_enable: bool = False):
    kind = types.SimpleNamespace(
        RUNTIME="runtime", DRIVER="driver", CONCURRENT_KERNEL="kernel", MEMCPY="memcpy",
        MEMSET="memset",
    )
    state: dict = {"enabled": set(), "callbacks": None, "finalized": 0, "seen": 0}

    def enable(k):
        if fail_enable:
            raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        state["enabled"].add(k)

    def flush_all(forced):
        acts = []
        for start, corr in gpu.launches[state["seen"]:]:
            acts.append(types.SimpleNamespace(kind="driver", start=start, end=start + LAUNCH_NS,
                                              correlation_id=corr))
        for corr, s, e, name in gpu.kernels[state["seen"]:]:
            acts.append(types.SimpleNamespace(kind="kernel", start=s, end=e, correlation_id=corr,
                                              name=name))
        state["seen"] = len(gpu.kernels)
        state["callbacks"][1](acts)

    def register(on_request, on_complete):
        size, limit = on_request()
        assert size > 0 and limit == 0
        state["callbacks"] = (on_request, on_complete)
        state["seen"] = len(gpu.kernels)  # only what runs while registered is recorded

    def finalize():
        state["finalized"] += 1

    fake = types.SimpleNamespace(
        ActivityKind=kind,
        activity_enable=enable,
        activity_disable=lambda k: state["enabled"].discard(k),
        activity_register_callbacks=register,
        activity_flush_all=flush_all,
        get_timestamp=lambda: gpu.host,
        finalize=finalize,
        state=state,
    )
    return fake


def install_fake_cupti(monkeypatch, gpu: FakeGpu, **kw):
    import sys

    fake = make_fake_cupti(gpu, **kw)
    monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=fake))
    return fake


def install_fake_profiler(monkeypatch, gpu: FakeGpu, annotate: bool = True) -> list:
    """torch.autograd.profiler over the simulated GPU: kineto's raw records are each marked
    range's host event, its GPU-side annotation (first kernel start to last kernel end) and the
    kernels recorded while the session was open."""
    marks: list[tuple[str, int, int]] = []
    sessions: list = []

    @contextmanager
    def record_function(name):
        first = len(gpu.kernels)
        yield
        marks.append((name, first, len(gpu.kernels)))

    class Raw:
        def __init__(self, name, device, start, end):
            self._r = (name, f"DeviceType.{device}", start, end - start)

        def name(self):
            return self._r[0]

        def device_type(self):
            return self._r[1]

        def start_ns(self):
            return self._r[2]

        def duration_ns(self):
            return self._r[3]

    class Profile:
        def __init__(self, use_device=None, use_cpu=True, use_kineto=False):
            assert use_device == "cuda" and use_cpu and use_kineto
            sessions.append(self)

        def __enter__(self):
            self.first = len(gpu.kernels)
            marks.clear()
            return self

        def __exit__(self, *exc):
            out = []
            for name, lo, hi in marks:
                out.append(Raw(name, "CPU", 0, 1))
                ks = gpu.kernels[lo:hi]
                if annotate and ks:
                    out.append(Raw(name, "CUDA", ks[0][1], max(k[2] for k in ks)))
            out += [Raw(n, "CUDA", s, e) for _, s, e, n in gpu.kernels[self.first:]]
            self.kineto_results = types.SimpleNamespace(events=lambda: out)

    monkeypatch.setattr(torch.autograd.profiler, "profile", Profile)
    monkeypatch.setattr(torch.autograd.profiler, "record_function", record_function)
    return sessions


def install_fake_events(monkeypatch, gpu: FakeGpu) -> None:
    """CUDA events: recorded in stream order, so one recorded before a call's launch reads the
    host's clock (the device is idle after the synchronize)."""

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing
            self.t = None

        def record(self) -> None:
            self.t = max(gpu.host, gpu.device_free)

        def elapsed_time(self, other) -> float:
            return (other.t - self.t) / 1e6

    monkeypatch.setattr(torch.cuda, "Event", Event)


@pytest.fixture
def gpu(monkeypatch) -> FakeGpu:
    g = FakeGpu()
    install_fake_sync(monkeypatch, g)
    install_fake_events(monkeypatch, g)
    return g


def _flusher(gpu: FakeGpu):
    def flush():
        gpu.log.append("flush")
        gpu.launch(1_000_000, name="flush")  # a long fill kernel: must stay out of every span

    return flush


def _measure(gpu, method, *, iterations=4, trials=2, warmup=1, prepared=None):
    return measure(
        plan_call(gpu, TWO_KERNELS),
        (prepared.append if prepared is not None else lambda i: None),
        device="cuda:0",
        method=method,
        warmup=warmup,
        iterations=iterations,
        trials=trials,
        flusher=_flusher(gpu),
    )


# --- pure attribution ------------------------------------------------------------------------


def test_judge_calls_take_the_work_launched_inside_each_window():
    launches = [(100, 1), (150, 2), (400, 3), (90, 9)]  # corr 9 was launched before window 0
    device = [(1, 110, 130, "a"), (2, 180, 200, "b"), (3, 410, 415, "a"), (9, 95, 300, "x")]
    calls = judge_calls(launches, device, [(100, 160), (390, 420)])
    assert calls[0] == CallTiming(90 / 1e6, 40 / 1e6, 2, frozenset({"a", "b"}))
    assert calls[1] == CallTiming(5 / 1e6, 5 / 1e6, 1, frozenset({"a"}))
    with pytest.raises(NoDeviceWork, match="timed call 1 launched no GPU work"):
        judge_calls(launches, device, [(100, 160), (500, 600)])


def test_busy_time_counts_overlapping_kernels_once():
    launches = [(0, 1), (1, 2), (2, 3)]
    device = [(1, 10, 50, "a"), (2, 20, 40, "b"), (3, 70, 80, "c")]  # b inside a, then c
    (call,) = judge_calls(launches, device, [(0, 5)])
    assert call.span_ms == pytest.approx(70 / 1e6) and call.busy_ms == pytest.approx(50 / 1e6)


def test_launch_bound_note_past_a_third_of_the_span_idle():
    assert launch_bound_note(0.030, 0.016, 2) is not None
    assert "47%" in launch_bound_note(0.030, 0.016, 2)
    assert launch_bound_note(0.030, 0.021, 2) is None  # 30% idle: fine
    assert launch_bound_note(0.030, None, None) is None


# --- whole timers on the simulated GPU -------------------------------------------------------


@pytest.mark.parametrize("method", ["cupti", "profiler"])
def test_device_timers_measure_the_judges_span_with_host_gaps(monkeypatch, gpu, method):
    install_fake_cupti(monkeypatch, gpu)
    install_fake_profiler(monkeypatch, gpu)
    result = _measure(gpu, method)
    assert result.method == method
    for trial in result.trials:  # calls alternate between the two plans
        assert trial["max"] == pytest.approx(SPAN0_MS) and trial["min"] == pytest.approx(SPAN1_MS)
    assert result.latency_ms == pytest.approx((SPAN0_MS + SPAN1_MS) / 2)
    assert result.busy_ms == pytest.approx((BUSY0_MS + SPAN1_MS) / 2)
    assert result.kernels_per_call == 1.5
    extra = result.to_extra()
    assert extra["timing_method"] == method and extra["busy_ms"] == pytest.approx(result.busy_ms)


def test_cupti_and_profiler_agree_and_cupti_cleans_up(monkeypatch, gpu):
    fake = install_fake_cupti(monkeypatch, gpu)
    install_fake_profiler(monkeypatch, gpu)
    by_cupti = _measure(gpu, "cupti", trials=3)
    by_profiler = _measure(gpu, "profiler", trials=3)
    assert by_cupti.overall == pytest.approx(by_profiler.overall)
    assert fake.state["enabled"] == set() and fake.state["finalized"] == 3  # once per trial


def test_the_protocol_is_the_judges(monkeypatch, gpu):
    """Per trial: one call, five flushed calls, the warm-up, then per timed call: prepare,
    flush, synchronize, call, synchronize. Untimed calls use the trial's first timed index."""
    install_fake_cupti(monkeypatch, gpu)
    prepared: list[int] = []
    _measure(gpu, "cupti", iterations=2, trials=2, warmup=1, prepared=prepared)
    untimed = lambda f: ["sync", f"call{f}", "sync"] + ["flush", f"call{f}"] * 6 + ["sync"]  # noqa: E731
    timed = lambda i: ["flush", "sync", f"call{i}", "sync"]  # noqa: E731
    expected = untimed(1) + timed(1) + timed(2) + untimed(3) + timed(3) + timed(4)
    assert gpu.log == expected
    assert prepared == [1] * 7 + [1, 2] + [3] * 7 + [3, 4]


def test_no_estimate_calls_off_the_judges_protocol(gpu):
    prepared: list[int] = []
    measure(plan_call(gpu, TWO_KERNELS), prepared.append, device="cuda:0", method="events",
            warmup=1, iterations=3, trials=1, flusher=_flusher(gpu), estimate=False)
    assert prepared == [1, 1, 2, 3]


def test_events_include_the_first_launch_and_warn(gpu):
    result = _measure(gpu, "events", trials=1)
    assert result.method == "events" and result.warnings == [EVENTS_WARNING]
    # from the event (host clock, before the launch) to the last kernel's end
    assert result.overall["max"] == pytest.approx(SPAN0_MS + LAUNCH_NS / 1e6)
    assert result.overall["min"] == pytest.approx(SPAN1_MS + LAUNCH_NS / 1e6)
    assert result.busy_ms is None


def test_launch_bound_call_gets_the_hint(monkeypatch, gpu):
    install_fake_cupti(monkeypatch, gpu)
    result = measure(plan_call(gpu, {0: TWO_KERNELS[0]}), lambda i: None, device="cuda:0",
                     method="cupti", warmup=0, iterations=3, trials=1, flusher=_flusher(gpu))
    assert result.latency_ms == pytest.approx(SPAN0_MS)
    assert any(w.startswith("launch-bound: 47%") for w in result.warnings)


def test_a_call_without_gpu_work_fails_as_the_judge_fails_it(monkeypatch, gpu):
    install_fake_cupti(monkeypatch, gpu)
    install_fake_profiler(monkeypatch, gpu)
    lazy = plan_call(gpu, {0: [(3_000, 0)], 1: []})  # every second call launches nothing
    for method in ("cupti", "profiler"):
        with pytest.raises(NoDeviceWork, match="launched no GPU work"):
            measure(lazy, lambda i: None, device="cuda:0", method=method, warmup=0,
                    iterations=2, trials=1, flusher=_flusher(gpu))


def test_cupti_that_cannot_start_falls_back_to_the_profiler_and_says_why(monkeypatch, gpu):
    install_fake_cupti(monkeypatch, gpu, fail_enable=True)
    install_fake_profiler(monkeypatch, gpu)
    result = _measure(gpu, "cupti", trials=1)
    assert result.method == "profiler"
    assert result.latency_ms == pytest.approx((SPAN0_MS + SPAN1_MS) / 2)
    assert result.warnings[0] == (
        "CUPTI could not start (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED); timed with "
        "torch's profiler, same span"
    )


def test_profiler_without_annotations_falls_back_to_events(monkeypatch, gpu):
    install_fake_profiler(monkeypatch, gpu, annotate=False)  # an older torch
    result = _measure(gpu, "profiler", trials=1)
    assert result.method == "events"
    assert result.warnings[0] == FALLBACK_NOTE + EVENTS_WARNING


def test_kernels_changing_between_calls_are_named(monkeypatch, gpu):
    install_fake_cupti(monkeypatch, gpu)
    result = _measure(gpu, "cupti", trials=1)  # call 0 runs k0 and k1, call 1 only k0
    assert any("kernels differ between timed calls" in w for w in result.warnings)


# --- method choice ---------------------------------------------------------------------------


def test_auto_takes_cupti_where_it_loads_and_says_why_not_elsewhere(monkeypatch):
    monkeypatch.setattr(timers, "cupti_unavailable_reason", lambda: None)
    assert available_methods("cuda") == ["cupti", "profiler", "events"]
    assert choose_method("auto", "cuda") == ("cupti", [])
    why = "cupti-python is not installed (pip install 'cupti-python>=13')"
    monkeypatch.setattr(timers, "cupti_unavailable_reason", lambda: why)
    assert available_methods("cuda") == ["profiler", "events"]
    method, notes = choose_method("auto", "cuda")
    assert method == "profiler" and notes == [
        f"timed with torch's profiler, not the judge's CUPTI timer: {why}"
    ]
    method, notes = choose_method("cupti", "cuda")
    assert method == "profiler" and why in notes[0]
    assert available_methods("cpu") == ["wall-clock"]
    assert timers.reference_method("auto", "cpu") == ("wall-clock", None)


def test_the_reference_leaves_cupti_for_the_profiler_except_under_the_judges_protocol(
    monkeypatch,
):
    monkeypatch.setattr(timers, "cupti_unavailable_reason", lambda: None)
    note = timers.REFERENCE_PROFILER_NOTE
    assert timers.reference_method("auto", "cuda") == ("profiler", note)
    assert timers.reference_method("cupti", "cuda") == ("profiler", note)
    assert timers.reference_method("auto", "cuda", judge=True) == ("cupti", None)
    assert timers.reference_method("events", "cuda") == ("events", None)
    assert "--contest" in note


def test_cupti_reason_here_matches_what_imports():
    try:
        from cupti import cupti  # noqa: F401
    except ImportError:
        assert "not installed" in timers.cupti_unavailable_reason()
    else:
        reason = timers.cupti_unavailable_reason()
        assert reason is None or "older" in reason


def test_l2_flusher_zeroes_twice_the_l2_in_whole_mib(monkeypatch):
    props = types.SimpleNamespace(L2_cache_size=50 * (1 << 20) + 123)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    flusher = L2Flusher("cpu")
    assert flusher.buffer.numel() == 100 << 20 and flusher.buffer.dtype == torch.int8
    flusher.buffer.fill_(7)
    flusher()
    assert int(flusher.buffer.abs().sum()) == 0


def test_time_runnable_gives_the_median_of_one_trial():
    calls: list[dict] = []

    def fn(**kwargs):
        calls.append(kwargs)
        time.sleep(0.002)

    ms = time_runnable(fn, {"x": 1}, warmup=2, iters=3, device="cpu")
    assert calls == [{"x": 1}] * 5
    assert 2.0 <= ms < 100
