"""The organizers' runner interface, under the organizers' module name, as the kit defines it.

Code written for flashinfer-bench drives a device with ``run_ref(definition, workload, cfg)``
(returns a ``BaselineHandle``), then ``run_solution(solution, handle, cfg) -> Evaluation`` for
each solution, then ``release(handle)``. :class:`fib_core.bench.runners.mp_runner.
MultiProcessRunner` implements it over the kit's worker process (the same one
:class:`fib_core.bench.Benchmark` uses); these are the shared names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class RunnerError(RuntimeError):
    """A runner could not do what was asked (unknown baseline, mismatched definition...)."""


class RunnerFatalError(RunnerError):
    """The runner cannot go on (its device is unusable); make a new one."""


class BaselineHandle(str):
    """Opaque id of a prepared baseline (definition x workload) on one runner."""


@dataclass
class DeviceBaseline:
    """What a runner keeps for a baseline until ``release``: the pair and where its blobs are."""

    handle: BaselineHandle
    definition: Any
    workload: Any
    device: str
    traceset_root: Path | None = None


class Runner(ABC):
    """One device's evaluator. ``log_dir`` None = a private temporary folder."""

    def __init__(self, device: str, log_dir: str | None = None) -> None:
        self.device = device
        self.log_dir = log_dir

    @abstractmethod
    def run_ref(
        self, defn: Any, workload: Any, cfg: Any, traceset_root: Path | None = None
    ) -> BaselineHandle:
        """Prepare the reference side of (definition, workload); returns its handle."""

    @abstractmethod
    def run_solution(self, sol: Any, baseline: BaselineHandle, cfg: Any) -> Any:
        """Evaluate ``sol`` against a prepared baseline; returns an ``Evaluation``."""

    @abstractmethod
    def close(self) -> None:
        """Stop the runner's processes."""

    @abstractmethod
    def release(self, baseline: BaselineHandle) -> None:
        """Forget a baseline."""
