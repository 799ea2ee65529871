"""What the server does behind its routes: look things up in the dataset, turn a submission
into a task, make the engine's request for it, and keep its traces as a run keeps them.

A request for a task is built as ``run_local.py`` builds one (:func:`fib_core.bench.settings.
merge`: the definition's ``eval.toml``, the CPU smoke counts on a CPU, then the server's
flags), so a solution gets the same settings and timers here as in a local run. Traces (and
the solution they name) are appended to the dataset as ``python -m fib_core run`` appends them,
unless the server was started with ``--no-save-results``; workers never see those folders.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fib_core.bench.engine.shard_run import RunRequest
from fib_core.bench.grading import eval_settings
from fib_core.bench.settings import merge
from fib_core.errors import FibError, SchemaError
from fib_core.serve.tasks import Task, TaskStore

log = logging.getLogger("fib_core.serve")

MAX_NAME = 128


class Rejected(Exception):
    """A submission the server refuses: ``status`` is the HTTP code, ``detail`` one line."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class ServiceSettings:
    dataset: Path
    flags: dict[str, Any] = field(default_factory=dict)  # engine settings the flags gave
    save_results: bool = True


class Service:
    """The dataset, the tasks and the rules for both."""

    def __init__(self, settings: ServiceSettings, store: TaskStore) -> None:
        # Imported here: fib_core.data loads pydantic (~50 ms); this module's import does not.
        from fib_core.data import TraceSet

        self.settings = settings
        self.trace_set = TraceSet.from_path(settings.dataset)
        self.store = store
        self._saving = threading.Lock()
        self._by_uuid = {r.workload.uuid: r.workload for records in
                         self.trace_set.workloads.values() for r in records}

    # --- lookups ---------------------------------------------------------------------------

    def definition(self, name: str) -> Any | None:
        return self.trace_set.definitions.get(name)

    def workloads(self, name: str) -> list[Any]:
        return [r.workload for r in self.trace_set.workloads.get(name, [])]

    def workload(self, uuid: str) -> Any | None:
        return self._by_uuid.get(uuid)

    # --- submissions -----------------------------------------------------------------------

    def normalize(self, raw: Any) -> Any:
        """The submitted solution, checked, named ``<name>_<first 8 of its hash>`` (the same
        code always gets the same name, as in the organizers' server)."""
        # Imported here: fib_core.data loads pydantic (~50 ms); this module's import does not.
        from fib_core.data import Solution

        try:
            solution = Solution.from_dict(raw)
        except SchemaError as err:
            raise Rejected(422, f"solution: {err}") from None
        except FibError as err:
            raise Rejected(422, f"solution: {err}") from None
        if len(solution.name) > MAX_NAME:
            raise Rejected(422, f"solution: name: {len(solution.name)} characters; use at "
                           f"most {MAX_NAME}")
        if solution.definition not in self.trace_set.definitions:
            raise Rejected(400, f"solution: definition: {solution.definition!r} is not in the "
                           "dataset; GET /definitions lists them")
        return Solution.from_dict({**solution.to_dict(),
                                   "name": f"{solution.name}_{solution.hash()[:8]}"})

    def create_task(self, raw: Any, workload_uuids: list[str] | None) -> Task:
        solution = self.normalize(raw)
        known = [w.uuid for w in self.workloads(solution.definition)]
        if workload_uuids is None:
            chosen = known
        else:
            chosen = list(dict.fromkeys(workload_uuids))
            kept = set(known)
            missing = [u for u in chosen if u not in kept]
            if missing:
                raise Rejected(400, f"workload_uuids: {missing[0]!r} is not a workload of "
                               f"{solution.definition}; GET /definitions/"
                               f"{solution.definition}/workloads lists them")
        return self.store.create(solution.definition, solution.to_dict(), chosen)

    # --- evaluation ------------------------------------------------------------------------

    def make_request(self, task: Task, kind: str) -> dict[str, Any]:
        """The RunRequest fields of ``task`` on a device of ``kind`` ("cuda" | "cpu")."""
        engine = merge(definition=eval_settings(task.definition).local_fields(),
                       cpu=kind == "cpu", flags=self.settings.flags)
        for name in ("workloads", "device"):
            engine.pop(name, None)
        request = RunRequest(solution=task.solution, definition=task.definition,
                             filters=list(task.workload_uuids), quick=False, engine=engine,
                             device=kind, dataset_path=str(self.settings.dataset))
        return asdict(request)

    def task_timeout(self, task: Task) -> float:
        """The most a task may take before its lane gives up on it: each workload's own
        timeout twice over (reference and solution), plus start-up."""
        per = float(self.settings.flags.get("timeout_seconds") or 300.0)
        return 300.0 + len(task.workload_uuids) * (2 * per + 60.0)

    def finished(self, task: Task, shard: dict[str, Any]) -> list[dict[str, Any]]:
        """Keep a finished evaluation's traces; the trace dicts the task reports."""
        # Imported here: fib_core.data loads pydantic (~50 ms); this module's import does not.
        from fib_core.data import Solution, Trace

        wanted = set(task.workload_uuids)
        traces = [t for t in (Trace.from_dict(d) for d in shard.get("traces", []))
                  if t.workload.uuid in wanted]
        if self.settings.save_results and traces:
            with self._saving:
                try:
                    if self.trace_set.get_solution(task.solution_name) is None:
                        self.trace_set.add_solution(Solution.from_dict(task.solution))
                    self.trace_set.add_traces(traces)
                except (OSError, FibError) as err:
                    log.warning("task %s: traces not saved in the dataset: %s", task.id, err)
        return [t.to_dict() for t in traces]
