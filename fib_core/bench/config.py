"""BenchmarkConfig: every knob of a benchmark run in one validated, picklable object.

The defaults are the organizers' (warmup 10, iterations 50, trials 3, timeout 300 s), so a local
run measures the way grading does unless the user asks otherwise. Tolerances default to None,
meaning "take the definition's own" (see :mod:`fib_core.bench.check` for the precedence); a
value set here always wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from fib_core.errors import ConfigError

DEVICES = ("auto", "cuda", "cpu")
TIMING_METHODS = ("auto", "cupti", "profiler", "events", "wall-clock")


@dataclass(frozen=True)
class BenchmarkConfig:
    """How to run: repetition counts, tolerances, isolation, device, seed, timing and filters.

    ``definitions``/``solutions``/``workloads`` restrict :meth:`Benchmark.run_all` (None = all;
    workloads are matched by uuid or a uuid prefix of at least 6 characters).
    ``generator_modules`` are imported by each worker before it runs anything, so a user's own
    input generators and checkers (``register_input_generator``/``register_checker``) are seen
    in the worker processes too.
    """

    warmup_runs: int = 10
    iterations: int = 50
    num_trials: int = 3
    atol: float | None = None
    rtol: float | None = None
    required_matched_ratio: float | None = None
    timeout_seconds: float = 300.0
    isolated: bool = False
    device: str = "auto"
    seed: int = 0
    timing_method: str = "auto"
    num_input_sets: int = 4
    definitions: tuple[str, ...] | None = None
    solutions: tuple[str, ...] | None = None
    workloads: tuple[str, ...] | None = None
    profile_baseline: bool = True
    allow_input_mutation: bool = False
    generator_modules: tuple[str, ...] = ()
    # Fraction of free device memory the rotated input sets may take; sets beyond it are dropped.
    input_memory_fraction: float = 0.4
    # Cap on the time spent timing the (often slow, plain-PyTorch) reference per trial.
    reference_time_budget_s: float = 20.0
    # A fib_core.compile.BuildOptions for the solutions' builds (None = the builder's defaults).
    build_options: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("warmup_runs",):
            _check_int(name, getattr(self, name), minimum=0)
        for name in ("iterations", "num_trials", "num_input_sets"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("seed", self.seed, minimum=0)
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and value >= 0):
                raise ConfigError(f"benchmark config: {name} = {value!r}; expected a number >= 0")
        ratio = self.required_matched_ratio
        if ratio is not None and not (_is_number(ratio) and 0.0 <= ratio <= 1.0):
            raise ConfigError(
                f"benchmark config: required_matched_ratio = {ratio!r}; expected a number in [0, 1]"
            )
        if not (_is_number(self.timeout_seconds) and self.timeout_seconds > 0):
            raise ConfigError(
                f"benchmark config: timeout_seconds = {self.timeout_seconds!r}; expected seconds > 0"
            )
        if self.device not in DEVICES:
            raise ConfigError(
                f"benchmark config: device = {self.device!r}; expected one of {', '.join(DEVICES)}"
            )
        if self.timing_method not in TIMING_METHODS:
            raise ConfigError(
                f"benchmark config: timing_method = {self.timing_method!r}; expected one of "
                f"{', '.join(TIMING_METHODS)}"
            )
        if not (_is_number(self.input_memory_fraction) and 0 < self.input_memory_fraction <= 1):
            raise ConfigError(
                f"benchmark config: input_memory_fraction = {self.input_memory_fraction!r}; "
                "expected a number in (0, 1]"
            )
        for name in ("definitions", "solutions", "workloads", "generator_modules"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigError(
                    f"benchmark config: {name} = {value!r}; expected a list of names"
                )
            object.__setattr__(self, name, tuple(value))

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


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"benchmark config: {name} = {value!r}; expected an integer >= {minimum}")
