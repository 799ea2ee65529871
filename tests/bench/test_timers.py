"""Every GPU timer of ``fib_core.bench.timing``, driven on CPU by a simulated GPU.

The simulated GPU keeps a timeline in nanoseconds: a call launches kernels separated by gaps,
and the fakes of torch's profiler, CUPTI and CUDA events report what the real ones would
(profiler: a CPU event and a GPU-side annotation per marked range; CUPTI: activity records
with correlation ids plus external-correlation records; events: host-side timestamps that
include launch overhead). Each test asserts the figures the timer must produce from them: the
span from the first kernel's start to the last one's end, gaps included, the fallback to CUDA
events when a device-side timer cannot time every call, its note, and the method the result
is labelled with.
"""

from __future__ import annotations

import time
import types
from contextlib import contextmanager

import pytest
import torch

from fib_core.bench import timing
from fib_core.bench.timing import (
    CUPTI_FALLBACK_NOTE,
    EVENTS_WARNING,
    FALLBACK_NOTE,
    L2Flusher,
    available_methods,
    choose_method,
    cupti_spans,
    measure,
    measured_method,
    profiler_spans,
)

LAUNCH_NS = 4_000  # host launch overhead the events see and the device-side timers do not


class FakeGpu:
    """A device timeline: each call's kernels, as (call index, correlation id, start, end)."""

    def __init__(self) -> None:
        self.now = 0
        self.kernels: list[tuple[int, int, int, int]] = []
        self.external: dict[int, int] = {}
        self.external_stack: list[int] = []
        self.next_corr = 100
        self.recording = False

    def launch(self, call: int, duration_ns: int, gap_ns: int = 0) -> None:
        start = self.now + LAUNCH_NS + gap_ns
        self.now = start + duration_ns
        corr = self.next_corr
        self.next_corr += 1
        if self.recording:
            self.kernels.append((call, corr, start, self.now))
            if self.external_stack:
                self.external[corr] = self.external_stack[-1]


def plan_call(gpu: FakeGpu, plan: dict[int, list[tuple[int, int]]]):
    """A solution call: call i launches the (duration, gap before) kernels ``plan[i % len]``."""

    def call(i: int) -> None:
        for duration, gap in plan[i % len(plan)]:
            gpu.launch(i, duration, gap)

    return call


class _Interval:
    def __init__(self, start_ns: int, end_ns: int) -> None:
        self.start_ns, self.end_ns = start_ns, end_ns

    def elapsed_us(self) -> float:
        return (self.end_ns - self.start_ns) / 1e3


def _profiler_event(name: str, device: str, start_ns: int, end_ns: int):
    return types.SimpleNamespace(
        name=name, device_type=f"DeviceType.{device}", time_range=_Interval(start_ns, end_ns)
    )


def install_fake_profiler(
    monkeypatch, gpu: FakeGpu, annotate: bool = True, raw: bool = False
) -> list:
    """torch.autograd.profiler's profile/record_function over the simulated GPU. Each marked range gives
    a CPU event (host time) and, when ``annotate``, the GPU annotation of its kernels. With
    ``raw`` the session also exposes the raw (kineto) records and its event list fails, so a
    test sees which one the timer read. Returns the list of sessions opened."""
    marks: list[tuple[str, int, int]] = []  # (name, first kernel index, end kernel index)
    sessions: list = []

    @contextmanager
    def record_function(name):
        first = len(gpu.kernels)
        yield
        marks.append((name, first, len(gpu.kernels)))

    def annotations():
        out = [("aten::zero_", "CPU", 0, 10)]  # unrelated ranges are skipped
        for name, lo, hi in marks:
            kernels = gpu.kernels[lo:hi]
            out.append((name, "CPU", 0, 1))
            if annotate and kernels:
                out.append((name, "CUDA", kernels[0][2], kernels[-1][3]))
        return out

    class RawRecord:
        def __init__(self, name, device, start_ns, end_ns):
            self._name, self._device, self._ns = name, f"DeviceType.{device}", end_ns - start_ns

        def name(self):
            return self._name

        def device_type(self):
            return self._device

        def duration_ns(self):
            return self._ns

    class Profile:
        def __init__(self, use_device=None, use_cpu=True, use_kineto=False):
            # CPU and CUDA: the annotation needs both
            assert use_device == "cuda" and use_cpu and use_kineto
            sessions.append(self)
            if raw:
                self.kineto_results = types.SimpleNamespace(
                    events=lambda: [RawRecord(*a) for a in annotations()]
                )

        def __enter__(self):
            gpu.recording = True
            return self

        def __exit__(self, *exc):
            gpu.recording = False

        @property
        def function_events(self):
            assert not raw, "the event tree was built although raw records were there"
            return [_profiler_event(*a) for a in annotations()]

    monkeypatch.setattr(torch.autograd.profiler, "profile", Profile)
    monkeypatch.setattr(torch.autograd.profiler, "record_function", record_function)
    return sessions


def install_fake_events(monkeypatch, gpu: FakeGpu) -> None:
    """CUDA events: recorded on the host, so the launch overhead of the first kernel counts."""

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing
            self.t = None

        def record(self) -> None:
            self.t = gpu.now

        def elapsed_time(self, other) -> float:
            return (other.t - self.t) / 1e6

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)


def make_fake_cupti(gpu: FakeGpu, drop_external_for: set[int] = frozenset()):
    """A ``cupti`` module over the simulated GPU; records for calls in ``drop_external_for``
    lose their external correlation (as when CUPTI's buffer overflowed)."""
    kind = types.SimpleNamespace(
        CONCURRENT_KERNEL="kernel",
        MEMCPY="memcpy",
        MEMSET="memset",
        EXTERNAL_CORRELATION="external",
    )
    state: dict = {"enabled": set(), "callbacks": None}

    def register(on_request, on_complete):
        size, limit = on_request()
        assert size > 0 and limit == 0
        state["callbacks"] = (on_request, on_complete)

    def enable(k):
        state["enabled"].add(k)
        gpu.recording = True

    def disable(k):
        state["enabled"].discard(k)
        gpu.recording = bool(state["enabled"])

    def flush_all(forced):
        acts = []
        for call, corr, t0, t1 in gpu.kernels:
            acts.append(types.SimpleNamespace(kind="kernel", correlation_id=corr, start=t0, end=t1))
            if corr in gpu.external and call not in drop_external_for:
                acts.append(
                    types.SimpleNamespace(
                        kind="external", correlation_id=corr, external_id=gpu.external[corr]
                    )
                )
        state["callbacks"][1](acts)

    return types.SimpleNamespace(
        ActivityKind=kind,
        ExternalCorrelationKind=types.SimpleNamespace(CUSTOM0="custom0"),
        activity_register_callbacks=register,
        activity_enable=enable,
        activity_disable=disable,
        activity_push_external_correlation_id=lambda k, i: gpu.external_stack.append(i),
        activity_pop_external_correlation_id=lambda k: gpu.external_stack.pop(),
        activity_flush_all=flush_all,
        state=state,
    )


def _no_flush() -> None:
    return None


# --- pure span selection -------------------------------------------------------------------


def test_profiler_spans_use_the_gpu_annotation_not_the_cpu_event():
    events = [  # host-side events of the same ranges, before and after, are ignored
        _profiler_event("fib_timed_call_3", "CPU", 0, 999_000),
        _profiler_event("fib_timed_call_3", "CUDA", 10_000, 25_000),
        _profiler_event("fib_timed_call_4", "CUDA", 40_000, 47_500),
        _profiler_event("fib_timed_call_4", "CPU", 30_000, 31_000),
        _profiler_event("other_range", "CUDA", 0, 5_000_000),
    ]
    assert profiler_spans(events, 3, 2) == [pytest.approx(0.015), pytest.approx(0.0075)]
    assert profiler_spans(events, 3, 3) is None  # call 5 has no span
    zero = [_profiler_event("fib_timed_call_0", "CUDA", 7, 7)]
    assert profiler_spans(zero, 0, 1) is None  # a call that launched nothing is not 0.0 ms


def test_cupti_spans_run_from_first_start_to_last_end_gaps_included():
    # call 0: kernels 1000-3000 and 8000-9000 (a 5 us gap) -> 8 us; call 1: one 2 us kernel.
    # Records arrive out of order, as CUPTI buffers deliver them.
    records = [(11, 8_000, 9_000), (10, 1_000, 3_000), (12, 20_000, 22_000), (99, 0, 10**9)]
    external = {10: 0, 11: 0, 12: 1}  # correlation 99 belongs to no timed call
    assert cupti_spans(records, external, 0, 2) == [pytest.approx(0.008), pytest.approx(0.002)]
    assert cupti_spans(records, external, 0, 3) is None
    assert cupti_spans([(10, 5, 5)], {10: 0}, 0, 1) is None


def test_measured_method_names_the_weakest_method_used():
    assert measured_method("profiler", None) == "profiler"
    assert measured_method("profiler", FALLBACK_NOTE + EVENTS_WARNING) == "events"
    assert measured_method("cupti", CUPTI_FALLBACK_NOTE) == "profiler"
    assert measured_method("cupti", FALLBACK_NOTE + EVENTS_WARNING) == "events"
    assert measured_method("events", CUPTI_FALLBACK_NOTE) == "events"  # never upgraded
    assert measured_method("cupti", "some other note") == "cupti"


# --- whole timers on the simulated GPU -----------------------------------------------------

# Call 0: kernels of 10 us and 6 us with a 20 us gap; call 1: one 3 us kernel.
TWO_KERNELS = {0: [(10_000, 0), (6_000, 20_000)], 1: [(3_000, 0)]}
# Span of call 0: 10 + (4 launch + 20 gap) + 6 = 40 us; call 1: 3 us.
SPANS_MS = [0.040, 0.003]


def _measure(monkeypatch, gpu, method, *, iterations=4, trials=2, warmup=1, reruns=0):
    """measure() over the plan; ``reruns``: how many times a fallback repeats a trial's calls
    (each repeat prepares the same inputs again)."""
    install_fake_events(monkeypatch, gpu)
    prepared: list[int] = []
    result = measure(
        plan_call(gpu, TWO_KERNELS),
        prepared.append,
        device="cuda:0",
        method=method,
        warmup=warmup,
        iterations=iterations,
        trials=trials,
        flusher=_no_flush,
    )
    expected = list(range(warmup))
    for t in range(trials):
        expected += list(range(warmup + t * iterations, warmup + (t + 1) * iterations)) * (
            1 + reruns
        )
    assert prepared == expected
    return result


def test_profiler_timer_measures_each_calls_span(monkeypatch):
    gpu = FakeGpu()
    install_fake_profiler(monkeypatch, gpu)
    result = _measure(monkeypatch, gpu, "profiler")
    # warm-up call 0, then calls 1..4 and 5..8: spans alternate 3 us, 40 us.
    for trial in result.trials:
        assert trial["min"] == pytest.approx(SPANS_MS[1]) and trial["max"] == pytest.approx(
            SPANS_MS[0]
        )
    assert result.latency_ms == pytest.approx(sum(SPANS_MS) / 2)  # median of 2 and 2
    assert result.method == "profiler" and result.warnings == []
    assert result.to_extra()["timing_method"] == "profiler"


def test_profiler_timer_falls_back_to_events_and_says_so(monkeypatch):
    gpu = FakeGpu()
    install_fake_profiler(monkeypatch, gpu, annotate=False)  # an older torch: no annotations
    result = _measure(monkeypatch, gpu, "profiler", trials=1, reruns=1)
    assert result.method == "events"
    assert result.warnings == [FALLBACK_NOTE + EVENTS_WARNING]
    # events include the launch overhead of each call's first kernel: 44 us and 7 us.
    assert result.overall["min"] == pytest.approx(0.007)
    assert result.overall["max"] == pytest.approx(0.044)
    assert result.to_extra()["timing_warnings"] == [FALLBACK_NOTE + EVENTS_WARNING]


def test_events_timer_includes_launch_overhead_and_warns(monkeypatch):
    gpu = FakeGpu()
    result = _measure(monkeypatch, gpu, "events", trials=1)
    assert result.method == "events" and result.warnings == [EVENTS_WARNING]
    assert sorted(set(round(t, 6) for t in [result.overall["min"], result.overall["max"]])) == [
        0.007,
        0.044,
    ]


def test_cupti_timer_attributes_records_by_external_correlation(monkeypatch):
    gpu = FakeGpu()
    fake = make_fake_cupti(gpu)
    monkeypatch.setattr(timing, "_cupti_module", lambda: fake)
    result = _measure(monkeypatch, gpu, "cupti")
    assert result.method == "cupti" and result.warnings == []
    assert result.overall["n"] == 8
    assert result.overall["min"] == pytest.approx(SPANS_MS[1])
    assert result.overall["max"] == pytest.approx(SPANS_MS[0])
    assert result.latency_ms == pytest.approx(sum(SPANS_MS) / 2)
    assert fake.state["enabled"] == set()  # every activity kind disabled again
    assert gpu.external_stack == []  # every push popped


def test_cupti_timer_falls_back_to_the_profiler_and_relabels(monkeypatch):
    gpu = FakeGpu()
    monkeypatch.setattr(timing, "_cupti_module", lambda: make_fake_cupti(gpu, {2}))
    install_fake_profiler(monkeypatch, gpu)
    result = _measure(monkeypatch, gpu, "cupti", trials=1, reruns=1)
    assert result.method == "profiler"
    assert result.warnings == [CUPTI_FALLBACK_NOTE]
    assert result.overall["min"] == pytest.approx(SPANS_MS[1])
    assert result.overall["max"] == pytest.approx(SPANS_MS[0])


def test_cupti_then_profiler_failing_ends_on_events(monkeypatch):
    gpu = FakeGpu()
    monkeypatch.setattr(timing, "_cupti_module", lambda: make_fake_cupti(gpu, {1, 2, 3, 4}))
    install_fake_profiler(monkeypatch, gpu, annotate=False)
    result = _measure(monkeypatch, gpu, "cupti", trials=1, reruns=2)
    assert result.method == "events"
    assert result.warnings == [FALLBACK_NOTE + EVENTS_WARNING]
    assert result.overall["max"] == pytest.approx(0.044)


def test_cuda_methods_listed_best_first(monkeypatch):
    monkeypatch.setattr(timing, "_cupti_module", lambda: None)
    assert available_methods("cuda") == ["profiler", "events"]
    assert choose_method("cupti", "cuda") == (
        "profiler",
        ["timing method 'cupti' is not available here; used 'profiler'"],
    )
    monkeypatch.setattr(timing, "_cupti_module", lambda: object())
    assert available_methods("cuda") == ["profiler", "cupti", "events"]
    assert choose_method("cupti", "cuda") == ("cupti", [])
    assert choose_method("auto", "cuda") == ("profiler", [])
    assert available_methods("cpu") == ["wall-clock"]


def test_cupti_module_absent_here_is_none():
    try:
        import cupti  # noqa: F401
    except ImportError:
        assert timing._cupti_module() is None
    else:
        assert timing._cupti_module() is not None


def test_l2_flusher_zeroes_twice_the_l2(monkeypatch):
    props = types.SimpleNamespace(L2_cache_size=1024)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    flusher = L2Flusher("cpu")
    assert flusher.buffer.numel() * flusher.buffer.element_size() == 2048
    flusher.buffer.fill_(7)
    flusher()
    assert int(flusher.buffer.abs().sum()) == 0
    props.L2_cache_size = 0  # unknown L2: the default size
    assert L2Flusher("cpu").buffer.numel() * 4 == 2 * timing.DEFAULT_L2_BYTES


def test_measure_on_cuda_makes_its_own_flusher(monkeypatch):
    gpu = FakeGpu()
    made: list[str] = []

    class Flusher:
        def __init__(self, device):
            made.append(device)

        def __call__(self):
            gpu.now += 1_000_000  # the flush runs between calls, outside every span

    monkeypatch.setattr(timing, "L2Flusher", Flusher)
    install_fake_profiler(monkeypatch, gpu)
    install_fake_events(monkeypatch, gpu)
    result = measure(
        plan_call(gpu, TWO_KERNELS),
        lambda i: None,
        device="cuda:1",
        method="profiler",
        warmup=0,
        iterations=2,
        trials=1,
    )
    assert made == ["cuda:1"]
    assert result.overall["max"] == pytest.approx(SPANS_MS[0])


@pytest.mark.parametrize(
    ("method", "trials"),
    [("events", 1), ("profiler", 1), ("cupti", 1), ("events", 2), ("profiler", 2), ("cupti", 2)],
)
def test_every_timed_call_is_prepared_then_flushed(monkeypatch, method, trials):
    gpu = FakeGpu()
    install_fake_events(monkeypatch, gpu)
    install_fake_profiler(monkeypatch, gpu)
    monkeypatch.setattr(timing, "_cupti_module", lambda: make_fake_cupti(gpu))
    order: list[str] = []
    launch = plan_call(gpu, TWO_KERNELS)

    def call(i):
        order.append(f"call{i}")
        launch(i)

    measure(
        call,
        lambda i: order.append(f"prepare{i}"),
        device="cuda:0",
        method=method,
        warmup=1,
        iterations=2,
        trials=trials,
        flusher=lambda: order.append("flush"),
    )
    # warm-up calls are not flushed; every timed call starts with a cold L2.
    expected = ["prepare0", "call0"]
    for i in range(1, 1 + 2 * trials):
        expected += [f"prepare{i}", "flush", f"call{i}"]
    assert order == expected


def test_profiler_spans_from_raw_records_without_the_event_tree(monkeypatch):
    gpu = FakeGpu()
    install_fake_profiler(monkeypatch, gpu, raw=True)
    result = _measure(monkeypatch, gpu, "profiler")
    assert result.method == "profiler" and result.warnings == []
    assert result.overall["min"] == pytest.approx(SPANS_MS[1])
    assert result.overall["max"] == pytest.approx(SPANS_MS[0])


@pytest.mark.parametrize("one_session", [True, False])
def test_profiler_trials_share_one_session_and_recheck_between_trials(monkeypatch, one_session):
    gpu = FakeGpu()
    sessions = install_fake_profiler(monkeypatch, gpu)
    install_fake_events(monkeypatch, gpu)
    rechecks: list[tuple[int, int, bool]] = []
    result = measure(
        plan_call(gpu, TWO_KERNELS),
        lambda i: None,
        device="cuda:0",
        method="profiler",
        warmup=1,
        iterations=2,
        trials=3,
        flusher=_no_flush,
        after_trial=lambda t, last: rechecks.append((t, last, gpu.recording)),
        one_session=one_session,
    )
    assert len(sessions) == (1 if one_session else 3)
    # the re-check of each trial's last call: inside the one session, or after each session
    assert rechecks == [(0, 2, one_session), (1, 4, one_session), (2, 6, one_session)]
    assert [t["n"] for t in result.trials] == [2, 2, 2]
    assert result.latency_ms == pytest.approx(sum(SPANS_MS) / 2)  # each trial: one of each


def test_time_runnable_gives_the_median_of_one_trial():
    calls: list[dict] = []

    def fn(**kwargs):
        calls.append(kwargs)
        time.sleep(0.002)

    ms = timing.time_runnable(fn, {"x": 1}, warmup=2, iters=3, device="cpu")
    assert calls == [{"x": 1}] * 5
    assert 2.0 <= ms < 100
