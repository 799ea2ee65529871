"""``Benchmark`` in both of the organizers' documented forms, over the kit's one engine.

- README form (the kit's own): ``Benchmark(trace_set, config).run_all(dump_traces=True,
  resume=False) -> list[Trace]``, ``run_solution(...)``, ``close()``.
- Reference-listing form: ``Benchmark(trace_set, log_level="INFO")``, then
  ``run(config)`` (evaluates every definition x solution x workload and stages the traces),
  ``flush()`` (writes the staged traces into the dataset: the first flush moves the existing
  ``traces/`` folder aside to ``traces_bak_<time>``, as the organizers' tool does), and
  ``evaluate(config) -> TraceSet`` (the same run, returned as an in-memory TraceSet of the
  dataset's definitions, solutions and workloads plus the new traces; nothing is staged).

The second argument may be a ``BenchmarkConfig`` (README form) or a log level name (listing
form); ``config=`` and ``log_level=`` also work by keyword.

    >>> bench = Benchmark(TraceSet.from_path("my-dataset"))                  # doctest: +SKIP
    >>> results = bench.evaluate(BenchmarkConfig(iterations=20))            # doctest: +SKIP
    >>> [t.is_successful() for traces in results.traces.values() for t in traces]  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from typing import Any

from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.engine.flow import Engine, EventFn
from fib_core.bench.evaluation.environment import resolve_device
from fib_core.bench.events import Log, WorkloadFinished
from fib_core.data.traceset import TraceSet
from fib_core.errors import ConfigError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

log = logging.getLogger("fib_core.bench")


class Benchmark(Engine):
    """The kit's benchmark engine, also reachable through the organizers' ``run``/``evaluate``."""

    def __init__(
        self,
        trace_set: Any,
        log_level: str | BenchmarkConfig | None = "INFO",
        config: BenchmarkConfig | None = None,
        *,
        on_event: EventFn | None = None,
    ) -> None:
        if isinstance(log_level, BenchmarkConfig):
            if config is not None:
                raise ConfigError("Benchmark: two configs given; pass one")
            log_level, config = "INFO", log_level
        level = str(log_level or "INFO").upper()
        if level not in LOG_LEVELS:
            raise ConfigError(
                f"Benchmark: log_level = {log_level!r}; expected one of {', '.join(LOG_LEVELS)}"
            )
        super().__init__(trace_set, config, on_event=on_event)
        self.log_level = level
        self._staged: list[Any] = []
        self._flushed_once = False
        self._started: str | None = None  # the device the first run/evaluate resolved

    # --- the organizers' reference-listing form -------------------------------------------------

    def run(self, config: BenchmarkConfig | None = None) -> None:
        """Evaluate everything the config selects and stage the traces for :meth:`flush`.

        ``config`` is this call's only (as in the organizers' ``run(config=BenchmarkConfig())``);
        None = the one given at construction, else the defaults.
        """
        self._staged.extend(self._evaluate_all(config))

    def evaluate(self, config: BenchmarkConfig | None = None) -> Any:
        """Evaluate everything the config selects; the results as an in-memory TraceSet.
        ``config`` as for :meth:`run`."""
        traces = self._evaluate_all(config)
        ts = self.trace_set
        by_definition: dict[str, list[Any]] = {}
        for trace in traces:
            by_definition.setdefault(trace.definition, []).append(trace)
        return TraceSet(
            root=None,
            definitions=dict(ts.definitions),
            solutions={name: list(sols) for name, sols in ts.solutions.items()},
            workloads={name: list(records) for name, records in ts.workloads.items()},
            traces=by_definition,
        )

    def flush(self) -> None:
        """Write the staged traces into the dataset (in memory only when it has no root)."""
        if not self._staged:
            return
        root = self.trace_set.root
        if root is not None and not self._flushed_once:
            current = root / "traces"
            if current.is_dir() and any(p.is_file() for p in current.rglob("*")):
                backup = self.trace_set.backup_traces()
                log.info("previous traces moved to %s", backup)
        self._flushed_once = True
        staged, self._staged = self._staged, []
        self.trace_set.add_traces(staged)

    @property
    def staged_traces(self) -> list[Any]:
        """Traces evaluated by :meth:`run` and not yet flushed."""
        return list(self._staged)

    # --- internals -----------------------------------------------------------------------------

    def _evaluate_all(self, config: BenchmarkConfig | None) -> list[Any]:
        """One call with ``config`` (None: the construction's); the construction's config is
        back afterwards, so a later call without one never inherits this call's filters."""
        if config is not None and not isinstance(config, BenchmarkConfig):
            raise TypeError(
                f"Benchmark: the config is a {type(config).__name__}; pass a BenchmarkConfig, "
                "e.g. BenchmarkConfig(iterations=20)"
            )
        chosen = config if config is not None else self.config
        if self._started is None and hasattr(self, "_kind"):  # run_all/run_solution came first
            self._started = resolve_device(self.config.device)
        device = resolve_device(chosen.device)
        if self._started is not None and device != self._started:
            raise ConfigError(
                f"Benchmark: config.device = {chosen.device!r} but this Benchmark already "
                f"runs on {self._started!r}; make a new Benchmark for another device"
            )
        self._started = device
        on_event = self.on_event or self._log_event
        saved, self.config = self.config, chosen
        try:
            return self.run_all(dump_traces=False, on_event=on_event)
        finally:
            self.config = saved

    def _log_event(self, event: Any) -> None:
        """Default progress for the listing form: one log line per finished workload."""
        numeric = getattr(logging, self.log_level)
        if not log.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s: %(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.DEBUG)
        if isinstance(event, WorkloadFinished):
            trace = event.trace
            status = trace.evaluation.status.value if trace.evaluation is not None else "?"
            level = logging.INFO if trace.is_successful() else logging.WARNING
            if level >= numeric:
                log.log(
                    level,
                    "solution %r, workload %s: %s",
                    trace.solution,
                    trace.workload.uuid,
                    status,
                )
        elif isinstance(event, Log):
            level = getattr(logging, str(event.level).upper(), logging.INFO)
            if level >= numeric:
                log.log(level, "%s", event.message)
