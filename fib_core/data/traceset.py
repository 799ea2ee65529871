"""TraceSet: one dataset in memory (definitions, solutions, workloads, traces) and its folder.

Layout on disk (FlashInfer-Trace): ``definitions/**.json``, ``solutions/**.json``,
``workloads/**.jsonl``, ``traces/**.jsonl``, ``blob/**.safetensors``; where each record goes is
in :mod:`.dataset_layout`. With ``root=None`` the set lives in memory only and the add methods
never touch disk.
"""

from __future__ import annotations

import gc
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.errors import SchemaError

from . import scoring
from .blobs import load_blob, resolve_blob_path, save_blob
from .dataset_layout import (
    DATASET_FOLDERS,
    DEFAULT_DATASET_PATH,
    check_dataset_root,
    dataset_files,
    default_dataset_root,
    definition_file,
    solution_file,
    trace_file,
    traces_backup_folder,
    workload_blob_file,
    workload_file,
)
from .definition import Definition
from .errors import DatasetError, UnknownDefinitionError
from .json_io import append_jsonl, dump_json, iter_records, load_json
from .solution import Solution
from .trace import Trace
from .workload_checks import check_workload

if TYPE_CHECKING:
    import torch

# Also importable from here: the layout's default root and folder names.
__all__ = ["DATASET_FOLDERS", "DEFAULT_DATASET_PATH", "TraceSet", "default_dataset_root"]


@dataclass
class TraceSet:
    root: Path | None = None
    definitions: dict[str, Definition] = field(default_factory=dict)
    solutions: dict[str, list[Solution]] = field(default_factory=dict)
    workloads: dict[str, list[Trace]] = field(default_factory=dict)
    traces: dict[str, list[Trace]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.root is not None:
            self.root = Path(self.root)
        self._solution_by_name: dict[str, Solution] = {}
        self._solution_files: dict[str, Path] = {}
        for sols in self.solutions.values():
            for sol in sols:
                self._index_solution(sol)

    def _index_solution(self, sol: Solution, file: Path | None = None) -> None:
        if sol.name in self._solution_by_name:
            first = self._solution_files.get(sol.name)
            raise SchemaError(
                "a solution name used once in the dataset",
                file=file,
                field="name",
                found=sol.name,
                hint=f"also used by {first}; rename one" if first else "rename one of the two",
            )
        self._solution_by_name[sol.name] = sol
        if file is not None:
            self._solution_files[sol.name] = file

    # --- loading --------------------------------------------------------------------------

    @classmethod
    def from_path(cls, path: str | Path | None = None) -> TraceSet:
        """Load a dataset folder (argument, else ``$FIB_DATASET_PATH``, else the default cache)."""
        root = Path(path).expanduser() if path is not None else default_dataset_root()
        check_dataset_root(root)
        # Building ~10 objects a record makes the cyclic GC rescan the growing heap again and
        # again (about a third of the CPU time at 50,000 traces); records hold no cycles.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return cls._load(root)
        finally:
            if gc_was_enabled:
                gc.enable()

    @classmethod
    def _load(cls, root: Path) -> TraceSet:
        ts = cls(root=root)
        definition_files: dict[str, Path] = {}
        for file in dataset_files(root / "definitions", "*.json"):
            definition = load_json(file, Definition)
            if definition.name in ts.definitions:
                raise SchemaError(
                    "a definition name used once in the dataset",
                    file=file,
                    field="name",
                    found=definition.name,
                    hint=f"also declared by {definition_files[definition.name]}; remove one",
                )
            ts.definitions[definition.name] = definition
            definition_files[definition.name] = file
        for file in dataset_files(root / "solutions", "*.json"):
            sol = load_json(file, Solution)
            ts._index_solution(sol, file)
            ts.solutions.setdefault(sol.definition, []).append(sol)
        for file in dataset_files(root / "workloads", "*.jsonl"):
            for lineno, trace in iter_records(file, Trace):
                ts._check_workload(trace, file, lineno)
                ts.workloads.setdefault(trace.definition, []).append(trace)
        for file in dataset_files(root / "traces", "*.jsonl"):
            for _, trace in iter_records(file, Trace):
                bucket = ts.workloads if trace.is_workload_trace() else ts.traces
                bucket.setdefault(trace.definition, []).append(trace)
        return ts

    def _check_workload(
        self, trace: Trace, file: Path | None = None, line: int | None = None
    ) -> None:
        """A workload must fit its definition (axes, input names and kinds, blob paths)."""
        definition = self.definitions.get(trace.definition)
        if definition is None:
            return  # a workload of a definition this dataset lacks is kept but not checked
        try:
            check_workload(definition, trace.workload)
        except SchemaError as err:
            raise err.located(file, line) from None

    # --- plain data and lookups ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "definitions": {name: d.to_dict() for name, d in self.definitions.items()},
            "solutions": {k: [s.to_dict() for s in v] for k, v in self.solutions.items()},
            "workloads": {k: [t.to_dict() for t in v] for k, v in self.workloads.items()},
            "traces": {k: [t.to_dict() for t in v] for k, v in self.traces.items()},
        }

    def get_solution(self, name: str) -> Solution | None:
        return self._solution_by_name.get(name)

    def get_definition(self, name: str) -> Definition:
        """The definition named ``name`` (an error that lists the known names otherwise)."""
        try:
            return self.definitions[name]
        except KeyError:
            raise UnknownDefinitionError(name, list(self.definitions)) from None

    def filter_traces(self, def_name: str, atol: float = 1e-2, rtol: float = 1e-2) -> list[Trace]:
        """Passed traces whose worst absolute and relative errors are within the bounds."""
        out = []
        for trace in self.traces.get(def_name, ()):
            ev = trace.evaluation
            if ev is None or not ev.passed or ev.correctness is None:
                continue
            corr = ev.correctness
            if corr.max_absolute_error <= atol and corr.max_relative_error <= rtol:
                out.append(trace)
        return out

    def get_best_trace(
        self,
        def_name: str,
        axes: dict[str, int] | None = None,
        max_abs_error: float = 1e-2,
        max_rel_error: float = 1e-2,
    ) -> Trace | None:
        """The qualifying passed trace with the highest speedup (optionally for exact ``axes``)."""
        candidates = [
            t
            for t in self.filter_traces(def_name, max_abs_error, max_rel_error)
            if axes is None or t.workload.axes == axes
        ]
        if not candidates:
            return None
        return max(candidates, key=lambda t: t.evaluation.performance.speedup_factor)

    # --- scoring ---------------------------------------------------------------------------
    # The formula lives in :mod:`fib_core.data.scoring`; these methods pick its inputs.

    def _scope(self, op_type: str | None, definition_name: str | None) -> list[str]:
        """The definitions a score covers (ValueError for both filters, KeyError for an
        unknown definition name)."""
        if op_type is not None and definition_name is not None:
            raise DatasetError("give op_type or definition_name, not both")
        if definition_name is not None:
            self.get_definition(definition_name)
            return [definition_name]
        return [n for n, d in self.definitions.items() if op_type is None or d.op_type == op_type]

    def get_solution_score(
        self, solution_name: str, baseline_author: str = "baseline"
    ) -> scoring.SpeedupMetrics | None:
        """The solution's contest score against the one solution of ``baseline_author`` for
        its definition: mean of baseline latency / solution latency over the workloads both
        ran (the baseline passing), each pair's lowest passing latency; 0 when any of the
        solution's traces failed.

        None for an unknown solution, the baseline itself, or no comparable workload.
        ValueError when the definition has no or several baseline solutions, or a PASSED
        trace has no usable latency.

        >>> ts.get_solution_score("mine", baseline_author="flashinfer").avg_speedup  # doctest: +SKIP
        1.42
        """
        sol = self.get_solution(solution_name)
        if sol is None:
            return None
        baseline = scoring.find_baseline(
            sol.definition, self.solutions.get(sol.definition, []), baseline_author
        )
        records = scoring.collect_records(self.traces.get(sol.definition, ()))
        return scoring.score_solution(sol, baseline, records)

    def _best_per_definition(
        self, authors: Iterable[str] | None, baseline_author: str, scope: list[str]
    ) -> dict[str, dict[str, tuple[str, scoring.SpeedupMetrics]]]:
        """Author -> {definition: (their best solution there, its score)} over ``scope``."""
        wanted = None if authors is None else set(authors)
        per_author: dict[str, dict[str, tuple[str, scoring.SpeedupMetrics]]] = {}
        for def_name in scope:
            solutions = self.solutions.get(def_name, [])
            contenders = {
                s.author
                for s in solutions
                if s.author != baseline_author and (wanted is None or s.author in wanted)
            }
            if not contenders:
                continue
            baseline = scoring.find_baseline(def_name, solutions, baseline_author)
            records = scoring.collect_records(self.traces.get(def_name, ()))
            for author in sorted(contenders):
                best = scoring.best_of_author(author, solutions, baseline, records)
                if best is not None:
                    per_author.setdefault(author, {})[def_name] = best
        return per_author

    def get_author_score(
        self,
        author: str,
        baseline_author: str = "baseline",
        op_type: str | None = None,
        definition_name: str | None = None,
    ) -> scoring.SpeedupMetrics | None:
        """The author's score: per definition in scope their best solution's score, then the
        plain mean over those definitions (``best_solutions`` names the solutions). None when
        nothing of theirs scores. KeyError for an unknown ``definition_name``; ValueError when
        both filters are given.

        A track's score, as the organizers compute it (MoE expects 1 definition, DSA and
        GDN 2)::

            s = ts.get_author_score("my-team", baseline_author="flashinfer", op_type="gdn")
            track = s.track_score(expected=2)   # == s.avg_speedup * s.definitions / 2
        """
        scope = self._scope(op_type, definition_name)
        best = self._best_per_definition([author], baseline_author, scope).get(author, {})
        return scoring.combine_definitions(best)

    def rank_authors(
        self,
        baseline_author: str = "baseline",
        op_type: str | None = None,
        definition_name: str | None = None,
    ) -> list[tuple[str, scoring.SpeedupMetrics]]:
        """(author, score) for every scorable author but the baseline's, best ``avg_speedup``
        first, then by name. ValueError when a definition in scope that has solutions lacks
        exactly one baseline solution; KeyError / ValueError for the filters as above.

        >>> [(a, round(s.avg_speedup, 2)) for a, s in ts.rank_authors("flashinfer")]  # doctest: +SKIP
        [('team-a', 1.7), ('team-b', 0.0)]
        """
        scope = self._scope(op_type, definition_name)
        for def_name in scope:
            if self.solutions.get(def_name):
                scoring.find_baseline(def_name, self.solutions[def_name], baseline_author)
        per_author = self._best_per_definition(None, baseline_author, scope)
        ranked = [
            (author, metrics)
            for author, best in per_author.items()
            if (metrics := scoring.combine_definitions(best)) is not None
        ]
        ranked.sort(key=lambda item: (-item[1].avg_speedup, item[0]))
        return ranked

    def summary(
        self,
        baseline_author: str = "baseline",
        op_type: str | None = None,
        definition_name: str | None = None,
    ) -> scoring.TraceSetSummary:
        """Counts of every evaluated trace (total, passed, failed) and the author rankings in
        scope (:meth:`rank_authors`, whose errors it raises). A dataset without traces has
        zero counts and no rankings.

        >>> s = ts.summary(baseline_author="flashinfer")  # doctest: +SKIP
        >>> s.total, s.passed, s.rankings[0][0]  # doctest: +SKIP
        (120, 118, 'team-a')
        """
        traces = [t for items in self.traces.values() for t in items]
        if not traces:
            return scoring.TraceSetSummary(total=0, passed=0, failed=0, rankings=[])
        passed = sum(1 for t in traces if t.evaluation is not None and t.evaluation.passed)
        return scoring.TraceSetSummary(
            total=len(traces),
            passed=passed,
            failed=len(traces) - passed,
            rankings=self.rank_authors(baseline_author, op_type, definition_name),
        )

    # --- writing ---------------------------------------------------------------------------

    def _require_root(self, action: str) -> Path:
        if self.root is None:
            raise DatasetError(f"cannot {action}: this TraceSet has no root folder (in memory)")
        return self.root

    def add_definition(self, definition: Definition) -> None:
        """Add a definition (written to ``definitions/<op_type>/<name>.json`` when rooted)."""
        if definition.name in self.definitions:
            raise DatasetError(f"definition {definition.name!r} is already in the dataset")
        self.definitions[definition.name] = definition
        if self.root is not None:
            dump_json(definition, definition_file(self.root, definition))

    def add_solution(self, solution: Solution) -> None:
        """Add a solution (written to ``solutions/<author>/<definition>/<name>.json`` when rooted)."""
        self._index_solution(solution)
        self.solutions.setdefault(solution.definition, []).append(solution)
        if self.root is not None:
            dump_json(solution, solution_file(self.root, solution))

    def add_traces(self, traces: Iterable[Trace]) -> None:
        """Add evaluated traces; when rooted, append to ``traces/<author>/<op_type>/<def>.jsonl``."""
        buckets: dict[Path, list[Trace]] = {}
        for trace in traces:
            if trace.is_workload_trace():
                raise DatasetError(
                    f"workload {trace.workload.uuid}: a bare workload record is not a trace; "
                    "use add_workload_traces"
                )
            definition = self.get_definition(trace.definition)
            self.traces.setdefault(trace.definition, []).append(trace)
            if self.root is not None:
                sol = self.get_solution(trace.solution) if trace.solution else None
                author = sol.author if sol is not None else "unknown"
                buckets.setdefault(trace_file(self.root, author, definition), []).append(trace)
        for path, items in buckets.items():
            append_jsonl(path, items)

    def add_workload_traces(self, traces: Iterable[Trace]) -> None:
        """Add workload records; when rooted, append to ``workloads/<op_type>/<def>.jsonl``."""
        buckets: dict[Path, list[Trace]] = {}
        for trace in traces:
            if not trace.is_workload_trace():
                raise DatasetError(
                    f"workload {trace.workload.uuid}: has a solution or evaluation; use add_traces"
                )
            definition = self.get_definition(trace.definition)
            self._check_workload(trace)
            self.workloads.setdefault(trace.definition, []).append(trace)
            if self.root is not None:
                buckets.setdefault(workload_file(self.root, definition), []).append(trace)
        for path, items in buckets.items():
            append_jsonl(path, items)

    def backup_traces(self) -> Path:
        """Move ``traces/`` aside to ``traces_bak_<time>`` and start empty; returns the backup."""
        root = self._require_root("back up traces")
        backup = traces_backup_folder(root)
        current = root / "traces"
        if current.exists():
            shutil.move(str(current), str(backup))
        else:
            backup.mkdir(parents=True)
        current.mkdir(parents=True, exist_ok=True)
        self.traces = {}
        return backup

    # --- blobs -----------------------------------------------------------------------------

    def add_workload_blob_tensor(
        self, def_name: str, workload_uuid: str, tensors: dict[str, torch.Tensor]
    ) -> str:
        """Save tensors under ``blob/workloads/<op_type>/<def>/``; returns the root-relative path."""
        root = self._require_root("save a workload blob")
        rel = workload_blob_file(self.get_definition(def_name), workload_uuid)
        save_blob(root / rel, tensors)
        return rel.as_posix()

    def get_workload_blob_tensor(self, path: str | Path) -> dict[str, torch.Tensor]:
        """Load a blob (path relative to the root, as written in workloads) to the CPU."""
        return load_blob(resolve_blob_path(self.root, path))
