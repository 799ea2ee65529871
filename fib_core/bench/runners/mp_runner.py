"""``MultiProcessRunner``: the organizers' per-device runner over the kit's benchmark worker.

Each evaluation goes through :meth:`fib_core.bench.engine.flow.Engine.run_solution`, so it runs
in the kit's worker process with the kit's inputs, reference cache, checks and timing: a
solution that crashes or hangs costs a worker, never the caller. ``run_ref`` records the
(definition, workload) pair and hands back a handle; the reference itself is computed by the
worker on the first solution (and kept in the kit's reference cache on disk, so every further
solution on the same pair reuses it).

    >>> runner = MultiProcessRunner("cpu")                           # doctest: +SKIP
    >>> handle = runner.run_ref(definition, workload, BenchmarkConfig(iterations=5))  # doctest: +SKIP
    >>> evaluation = runner.run_solution(solution, handle, cfg)      # doctest: +SKIP
    >>> runner.release(handle); runner.close()                       # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.runner import (
    BaselineHandle,
    DeviceBaseline,
    Runner,
    RunnerError,
    RunnerFatalError,
)
from fib_core.errors import ConfigError, FibError

_IDS = itertools.count(1)


def config_device(device: str) -> str:
    """The BenchmarkConfig device for a runner device name ("cpu", "cuda", "cuda:0")."""
    if device in ("cpu", "cuda", "auto"):
        return device
    if device == "cuda:0":
        return "cuda"
    raise RunnerFatalError(
        f"MultiProcessRunner: device {device!r} is not supported; use 'cuda' (the first GPU, "
        "choose it with CUDA_VISIBLE_DEVICES) or 'cpu'"
    )


class MultiProcessRunner(Runner):
    """Evaluates solutions on one device in the kit's worker process."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self._device = config_device(device)
        self._baselines: dict[str, DeviceBaseline] = {}
        self._bench: Any = None
        self._bench_key: tuple[Any, ...] | None = None

    def run_ref(
        self, defn: Any, workload: Any, cfg: BenchmarkConfig, traceset_root: Path | None = None
    ) -> BaselineHandle:
        """Register (definition, workload); blob paths resolve under ``traceset_root``."""
        handle = BaselineHandle(f"{defn.name}:{getattr(workload, 'uuid', '?')}:{next(_IDS)}")
        root = Path(traceset_root) if traceset_root is not None else None
        self._baselines[handle] = DeviceBaseline(
            handle, defn, getattr(workload, "workload", workload), self.device, root
        )
        return handle

    def run_solution(self, sol: Any, baseline: BaselineHandle, cfg: BenchmarkConfig) -> Any:
        """Evaluate ``sol`` on the baseline's workload; returns the trace's ``Evaluation``."""
        base = self._baselines.get(baseline)
        if base is None:
            raise RunnerError(f"unknown or released baseline {baseline!r}")
        if sol.definition != base.definition.name:
            raise RunnerError(
                f"solution {sol.name!r} is for {sol.definition!r}, the baseline for "
                f"{base.definition.name!r}"
            )
        bench = self._benchmark(cfg, base)
        try:
            traces = bench.run_solution(sol, [base.workload])
        except FibError as err:
            raise RunnerFatalError(str(err)) from None
        return traces[0].evaluation

    def release(self, baseline: BaselineHandle) -> None:
        self._baselines.pop(baseline, None)

    def close(self) -> None:
        """Stop the worker; the runner can still be used (a new worker starts on demand)."""
        if self._bench is not None:
            self._bench.close()
        self._bench = None
        self._bench_key = None

    def _benchmark(self, cfg: BenchmarkConfig, base: DeviceBaseline) -> Any:
        """The kit's engine for this config and dataset root (a new one when either changes)."""
        # Imported here: fib_core.bench.engine.flow loads pydantic (~50 ms); this module's import does not.
        from fib_core.bench.engine.flow import Engine
        from fib_core.data.traceset import TraceSet

        try:
            config = cfg.with_overrides(device=self._device)
        except ConfigError as err:
            raise RunnerFatalError(str(err)) from None
        key = (config, base.traceset_root)
        if self._bench is None or self._bench_key != key:
            self.close()
            self._bench = Engine(TraceSet(root=base.traceset_root), config)
            self._bench_key = key
        self._bench.trace_set.definitions[base.definition.name] = base.definition
        return self._bench

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
