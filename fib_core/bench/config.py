"""BenchmarkConfig: every knob of a benchmark run in one validated, picklable object.

The defaults are the organizers' (warmup 10, iterations 50, trials 3, timeout 300 s), so a local
run measures the way grading does unless the user asks otherwise. Tolerances default to None,
meaning "take the definition's own" (see :mod:`fib_core.bench.evaluation.check` for the precedence); a
value set here always wins. Each field's default and valid values come from the settings table
(:mod:`fib_core.bench.settings`), which the config file and the command lines are built from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from fib_core.bench.settings import DEVICES, SETTINGS, TIMING_METHODS, check_value, default
from fib_core.errors import ConfigError

__all__ = ["DEVICES", "TIMING_METHODS", "BenchmarkConfig"]


@dataclass(frozen=True)
class BenchmarkConfig:
    """How to run: repetition counts, tolerances, isolation, device, seed, timing and filters.

    ``definitions``/``solutions``/``workloads`` restrict :meth:`Benchmark.run_all` (None = all;
    workloads are matched by uuid or a uuid prefix of at least 6 characters).
    ``generator_modules`` are imported by each worker before it runs anything, so a user's own
    input generators and checkers (``register_input_generator``/``register_checker``) are seen
    in the worker processes too. The fields up to ``reference_time_budget_s`` are the rows of
    :data:`fib_core.bench.settings.SETTINGS` (a test keeps the two in step).
    """

    warmup_runs: int = default("warmup_runs")
    iterations: int = default("iterations")
    num_trials: int = default("num_trials")
    atol: float | None = default("atol")
    rtol: float | None = default("rtol")
    required_matched_ratio: float | None = default("required_matched_ratio")
    timeout_seconds: float = default("timeout_seconds")
    isolated: bool = default("isolated")
    device: str = default("device")
    seed: int = default("seed")
    timing_method: str = default("timing_method")
    num_input_sets: int = default("num_input_sets")
    definitions: tuple[str, ...] | None = default("definitions")
    solutions: tuple[str, ...] | None = default("solutions")
    workloads: tuple[str, ...] | None = default("workloads")
    profile_baseline: bool = default("profile_baseline")
    allow_input_mutation: bool = default("allow_input_mutation")
    generator_modules: tuple[str, ...] = default("generator_modules")
    # Fraction of free device memory the rotated input sets may take; sets beyond it are dropped.
    input_memory_fraction: float = default("input_memory_fraction")
    # Cap on the time spent timing the (often slow, plain-PyTorch) reference per trial.
    reference_time_budget_s: float = default("reference_time_budget_s")
    # A fib_core.compile.BuildOptions for the solutions' builds (None = the builder's defaults).
    build_options: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for setting in SETTINGS:
            value = check_value(setting.name, getattr(self, setting.name))
            object.__setattr__(self, setting.name, value)

    def with_overrides(self, **changes: Any) -> BenchmarkConfig:
        """A copy with the given fields replaced; None values are ignored (= "not set")."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(f"benchmark config: unknown field {unknown[0]!r}")
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def matches_workload(self, uuid: str) -> bool:
        """True when the workload filter is unset or names this uuid (or a prefix of it)."""
        if self.workloads is None:
            return True
        return any(uuid == w or (len(w) >= 6 and uuid.startswith(w)) for w in self.workloads)
