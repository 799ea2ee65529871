"""Timing overhead kept out of what is measured: the profiler timer does not import dynamo,
and the staging of each call's inputs and poisoned outputs copies what it must, in few copies.
"""

from __future__ import annotations

import pytest


@pytest.mark.gpu
def test_the_profiler_timer_leaves_torch_dynamo_unimported(tmp_path) -> None:
    """The timer's profiler session, timing a torch operation and a Triton kernel, does not
    import torch._dynamo (about 1 s that every worker used to pay before its first workload),
    and its spans are the device-side ones. In a fresh interpreter: this one may have imported
    dynamo already."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "probe.py"
    script.write_text(
        "import sys, torch, triton, triton.language as tl\n"
        "from fib_core.bench.evaluation import timers\n"
        "@triton.jit\n"
        "def add_one(p, n, BLOCK: tl.constexpr):\n"
        "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(p + i, tl.load(p + i, mask=i < n) + 1, mask=i < n)\n"
        "x = torch.randn(1 << 20, device='cuda')\n"
        "calls = [lambda i: x.mul_(1.0), lambda i: add_one[(4096,)](x, x.numel(), BLOCK=256)]\n"
        "for call in calls:\n"
        "    r = timers.measure(call, lambda i: None, device='cuda:0',\n"
        "                       method='profiler', warmup=2, iterations=10, trials=3)\n"
        "    assert r.method == 'profiler' and not r.warnings, r.warnings\n"
        "    assert 0 < r.latency_ms < 1, r.latency_ms\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "False"


def test_staging_copies_the_set_swaps_scalars_and_poisons_outputs(monkeypatch) -> None:
    import torch

    from fib_core.bench.evaluation import input_sets

    source = [torch.arange(6.0), 3, torch.tensor([7, 8], dtype=torch.int32)]
    working = [torch.zeros(6), 1, torch.zeros(2, dtype=torch.int32)]
    address = working[0].data_ptr()
    outputs = [torch.zeros(3), torch.zeros(2, dtype=torch.int64), torch.ones(2, dtype=torch.bool),
               None]
    batched = []

    def foreach_copy(targets, sources):
        batched.append(len(targets))
        for target, src in zip(targets, sources, strict=True):
            target.copy_(src)

    monkeypatch.setattr(torch, "_foreach_copy_", foreach_copy)
    stage = input_sets.Staging(working, [0, 1, 2], outputs)
    stage(source)
    # One batched copy for float32 (x and the float output); the int32 input and the int64
    # output are alone in their dtype (one plain copy each); the bool output has no poison
    # value.
    assert batched == [2]
    assert working[0].data_ptr() == address and working[0].tolist() == source[0].tolist()
    assert working[1] == 3 and working[2].tolist() == [7, 8]
    assert torch.isnan(outputs[0]).all()
    assert outputs[1].tolist() == [torch.iinfo(torch.int64).min] * 2
    assert outputs[2].tolist() == [True, True]
    outputs[0].zero_()  # a call writes its outputs; the next staging poisons them again
    stage(source)
    assert torch.isnan(outputs[0]).all()


def test_staging_copies_a_large_tensor_on_its_own(monkeypatch) -> None:
    """A tensor over BATCHED_COPY_MAX_BYTES is copied by ``copy_``, not in the batched copy
    (whose kernel is slow on large tensors: 3.7x a plain copy on a 940 MB fp8 MoE weight)."""
    import torch

    from fib_core.bench.evaluation import input_sets

    batched = []

    def foreach_copy(targets, sources):
        batched.append([t.numel() for t in targets])
        for target, src in zip(targets, sources, strict=True):
            target.copy_(src)

    monkeypatch.setattr(torch, "_foreach_copy_", foreach_copy)
    monkeypatch.setattr(input_sets, "BATCHED_COPY_MAX_BYTES", 64)
    working = [torch.zeros(100), torch.zeros(3), torch.zeros(4)]  # 400, 12 and 16 bytes
    stage = input_sets.Staging(working, [0, 1, 2], None)
    source = [torch.arange(100.0), torch.ones(3), torch.full((4,), 2.0)]
    stage(source)
    assert batched == [[3, 4]]
    assert all(w.tolist() == s.tolist() for w, s in zip(working, source, strict=True))


def test_staging_fills_outputs_over_the_template_budget(monkeypatch) -> None:
    import torch

    from fib_core.bench.evaluation import input_sets

    monkeypatch.setattr(input_sets, "POISON_TEMPLATE_BYTES", 8)
    out = torch.zeros(4)  # 16 bytes: no template, filled in place
    stage = input_sets.Staging([torch.zeros(2)], [0], [out])
    assert stage.templates == [] and stage.targets == [stage.working[0]]
    stage([torch.ones(2)])
    assert torch.isnan(out).all() and stage.working[0].tolist() == [1.0, 1.0]


def test_copy_all_without_a_batched_copy_copies_one_by_one(monkeypatch) -> None:
    import torch

    from fib_core.bench.evaluation import input_sets

    monkeypatch.delattr(torch, "_foreach_copy_")
    targets = [torch.zeros(2), torch.zeros(3)]
    input_sets.copy_all(targets, [torch.ones(2), torch.full((3,), 2.0)])
    assert targets[0].tolist() == [1.0, 1.0] and targets[1].tolist() == [2.0, 2.0, 2.0]


class _Lazy:
    """A destination-passing toy axpy that stops writing its output after ``honest`` calls."""

    dps = True

    def __init__(self, honest: int) -> None:
        self.honest, self.calls = honest, 0

    def run(self, inputs, outputs):
        x, y, alpha = inputs
        self.calls += 1
        if self.calls <= self.honest:
            outputs[0].copy_(alpha * x + y)
        return tuple(outputs)


@pytest.mark.parametrize("budget", [0, 1 << 30])
def test_rechecked_timed_calls_are_checked_from_device_or_host_copies(
    budget, monkeypatch, tmp_path, toy_definition, toy_workloads
) -> None:
    """Kept outputs of re-checked timed calls stay on the device within the budget and go to
    the host past it; either way an honest kernel passes and one that stops computing fails."""
    from fib_core.bench.config import BenchmarkConfig
    from fib_core.bench.evaluation import solution_timing
    from fib_core.bench.evaluation.environment import EnvironmentInfo
    from fib_core.bench.evaluation.evaluator import Evaluator
    from fib_core.bench.evaluation.failures import Failed
    from fib_core.bench.evaluation.tolerance import resolve_tolerance

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(solution_timing, "KEPT_ON_DEVICE_BYTES", budget)
    hosted = []
    real = solution_timing.to_host
    monkeypatch.setattr(solution_timing, "to_host", lambda v: (hosted.append(v), real(v))[1])
    cfg = BenchmarkConfig(device="cpu", warmup_runs=1, iterations=3, num_trials=2)
    ev = Evaluator("cpu", EnvironmentInfo(device_kind="cpu", hardware="cpu"))
    tol = resolve_tolerance(toy_definition, cfg)
    for honest, passes in ((10**6, True), (1, False)):
        prep = ev._prepare(toy_definition, toy_workloads[0], cfg, None)
        prep.complete()
        hosted.clear()
        if passes:
            result = ev._time_solution(toy_definition, _Lazy(honest), prep, tol, cfg)
            assert result.latency_ms > 0
        else:
            with pytest.raises(Failed, match="outputs of timed call"):
                ev._time_solution(toy_definition, _Lazy(honest), prep, tol, cfg)
        # last call of each trial plus one sampled call per trial: 4 kept output tuples
        assert len(hosted) == (4 if budget == 0 else 0)


def test_a_dtype_the_batched_copy_refuses_is_copied_one_by_one(monkeypatch) -> None:
    """The refusal is asked once per dtype group: later calls copy one by one at once."""
    import torch

    from fib_core.bench.evaluation import input_sets

    asked = []

    def refuse_int(targets, sources):
        asked.append(targets[0].dtype)
        if targets[0].dtype == torch.int32:
            raise NotImplementedError('"foreach_tensor_copy" not implemented for this dtype')
        for target, src in zip(targets, sources, strict=True):
            target.copy_(src)

    monkeypatch.setattr(torch, "_foreach_copy_", refuse_int)
    targets = [torch.zeros(2), torch.zeros(3)]
    assert not input_sets.copy_all(targets, [torch.ones(2), torch.full((3,), 2.0)], batched=False)
    assert targets[0].tolist() == [1.0, 1.0] and targets[1].tolist() == [2.0, 2.0, 2.0]
    working = [torch.zeros(2), torch.zeros(2, dtype=torch.int32)] * 2
    working = [t.clone() for t in working]
    stage = input_sets.Staging(working, [0, 1, 2, 3], None)
    for k in (1, 2, 3):
        stage([torch.full((2,), float(k)), torch.full((2,), k, dtype=torch.int32)] * 2)
        assert all(t.tolist() == [k, k] for t in working)
    assert asked.count(torch.int32) == 1 and asked.count(torch.float32) == 3


def test_without_memory_for_templates_the_outputs_are_filled_in_place(monkeypatch) -> None:
    import torch

    from fib_core.bench.evaluation import input_sets

    def no_memory(value):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(input_sets, "copy_output", no_memory)
    out = torch.zeros(4)
    stage = input_sets.Staging([torch.zeros(2)], [0], [out])
    assert stage.templates == [] and stage.filled == [out]
    stage([torch.ones(2)])
    assert torch.isnan(out).all()
