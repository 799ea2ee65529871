"""ApplyTable: for each definition, routing key -> the fastest trusted solution.

Built from a TraceSet's PASSED traces whose recorded errors are within the config's
tolerances; for each key the lowest-latency solution wins. Each definition also gets an
overall best (the solution that wins the most keys; ties go to the lower summed latency over
those keys), used by ``on_miss_policy="use_def_best"``.

Building reads every trace, so :meth:`ApplyTable.load_or_build` keeps the result on disk
under ``$FIB_CACHE_DIR/apply/<digest>.json``; the digest covers the config, each
definition's content, its key builder and the fields of every trace that can change the
winner, so any change to them gives a new file and a stale table is never read.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fib_core.atomic import atomic_write_text
from fib_core.errors import FibWarning
from fib_core.paths import cache_dir as default_cache_dir

from .config import ApplyConfig
from .key import ApplyKey, ApplyKeyFactory

TABLE_FORMAT = 1


@dataclass
class DefinitionRoutes:
    """One definition's routes: key -> solution name, and its overall best solution."""

    routes: dict[ApplyKey, str] = field(default_factory=dict)
    latency_ms: dict[ApplyKey, float] = field(default_factory=dict)
    best: str | None = None

    def ranked_solutions(self) -> list[str]:
        """Solutions by number of keys they win (most first), then name: the AOT build order."""
        wins: dict[str, int] = {}
        for name in self.routes.values():
            wins[name] = wins.get(name, 0) + 1
        return sorted(wins, key=lambda n: (-wins[n], n))


@dataclass
class ApplyTable:
    """Routes of every definition that has trusted traces; ``digest`` names the cache file."""

    config: ApplyConfig
    definitions: dict[str, DefinitionRoutes] = field(default_factory=dict)
    digest: str = ""
    from_cache: bool = False

    # --- building -------------------------------------------------------------------------

    @classmethod
    def build(cls, trace_set: Any, config: ApplyConfig) -> ApplyTable:
        table = cls(config=config, digest=table_digest(trace_set, config))
        for def_name, definition in trace_set.definitions.items():
            builder = ApplyKeyFactory.specialize(definition)
            routes = DefinitionRoutes()
            for trace in trace_set.filter_traces(def_name, config.max_atol, config.max_rtol):
                perf = trace.evaluation.performance
                if trace.solution is None or perf is None:
                    continue
                if trace_set.get_solution(trace.solution) is None:
                    continue  # a trace of a solution this dataset does not hold: cannot run it
                key = builder.build_from_workload(trace.workload)
                latency = float(perf.latency_ms)
                if (
                    key not in routes.latency_ms
                    or latency < routes.latency_ms[key]
                    or (latency == routes.latency_ms[key] and trace.solution < routes.routes[key])
                ):
                    routes.routes[key] = trace.solution
                    routes.latency_ms[key] = latency
            if routes.routes:
                routes.best = _overall_best(routes)
                table.definitions[def_name] = routes
        return table

    @classmethod
    def load_or_build(
        cls, ts: Any, config: ApplyConfig, cache_dir: str | Path | None = None
    ) -> ApplyTable:
        """The cached table for this trace set and config, built and saved on a miss."""
        trace_set = ts
        digest = table_digest(trace_set, config)
        path = cache_path(digest, cache_dir)
        if path.is_file():
            try:
                table = cls.from_dict(json.loads(path.read_text(encoding="utf-8")), config)
                if table.digest == digest:
                    table.from_cache = True
                    return table
            except (ValueError, KeyError, TypeError, OSError) as err:
                warnings.warn(f"{path}: unreadable apply table ({err}); rebuilding", stacklevel=2, category=FibWarning)
        table = cls.build(trace_set, config)
        try:
            atomic_write_text(path, json.dumps(table.to_dict(), sort_keys=True) + "\n")
        except OSError as err:  # a read-only cache costs the next start a rebuild, nothing more
            warnings.warn(f"{path}: cannot save the apply table ({err})", stacklevel=2, category=FibWarning)
        return table

    # --- lookups --------------------------------------------------------------------------

    def lookup(self, def_name: str, key: ApplyKey) -> str | None:
        routes = self.definitions.get(def_name)
        return None if routes is None else routes.routes.get(key)

    def match_solution(self, def_name: str, key: ApplyKey) -> str | None:
        """The organizers' name for :meth:`lookup`."""
        return self.lookup(def_name, key)

    def def_best(self, def_name: str) -> str | None:
        routes = self.definitions.get(def_name)
        return None if routes is None else routes.best

    # --- plain data -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": TABLE_FORMAT,
            "digest": self.digest,
            "config": self.config.to_dict(),
            "definitions": {
                name: {
                    "best": r.best,
                    "routes": [
                        {"key": k.encode, "solution": s, "latency_ms": r.latency_ms[k]}
                        for k, s in r.routes.items()
                    ],
                }
                for name, r in self.definitions.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], config: ApplyConfig) -> ApplyTable:
        if data.get("format") != TABLE_FORMAT:
            raise ValueError(f"table format {data.get('format')!r}, expected {TABLE_FORMAT}")
        table = cls(config=config, digest=str(data["digest"]))
        for name, entry in data["definitions"].items():
            routes = DefinitionRoutes(best=entry["best"])
            for row in entry["routes"]:
                key = ApplyKey.from_encoded(row["key"])
                routes.routes[key] = str(row["solution"])
                routes.latency_ms[key] = float(row["latency_ms"])
            table.definitions[name] = routes
        return table


def _overall_best(routes: DefinitionRoutes) -> str:
    wins: dict[str, int] = {}
    total: dict[str, float] = {}
    for key, name in routes.routes.items():
        wins[name] = wins.get(name, 0) + 1
        total[name] = total.get(name, 0.0) + routes.latency_ms[key]
    return min(wins, key=lambda n: (-wins[n], total[n], n))


def cache_path(digest: str, cache_dir: str | Path | None = None) -> Path:
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return base / "apply" / f"table-{digest}.json"


def table_digest(trace_set: Any, config: ApplyConfig) -> str:
    """sha256 over what decides the routes: config, definitions, builders, solutions, traces."""
    h = hashlib.sha256()
    h.update(f"apply-table v{TABLE_FORMAT}\n".encode())
    h.update(json.dumps(config.to_dict(), sort_keys=True).encode())
    sol_hashes: dict[str, str | None] = {}
    for def_name in sorted(trace_set.definitions):
        definition = trace_set.definitions[def_name]
        builder = type(ApplyKeyFactory.specialize(definition))
        h.update(
            f"\ndef {def_name} {definition.content_hash()} "
            f"{builder.__module__}.{builder.__qualname__}\n".encode()
        )
        for trace in trace_set.traces.get(def_name, ()):
            ev = trace.evaluation
            if ev is None:
                continue
            corr, perf = ev.correctness, ev.performance
            name = trace.solution
            if name is not None and name not in sol_hashes:
                sol = trace_set.get_solution(name)
                sol_hashes[name] = sol.hash() if sol is not None else None
            row = (
                name,
                sol_hashes.get(name) if name is not None else None,
                sorted(trace.workload.axes.items()),
                ev.status.value,
                None if corr is None else (corr.max_absolute_error, corr.max_relative_error),
                None if perf is None else perf.latency_ms,
            )
            h.update(repr(row).encode())
    return h.hexdigest()[:32]
