"""One (solution, workload) evaluation inside a worker: build -> inputs -> reference -> check ->
time -> re-check -> reference latency.

Runs in the worker process only. Keeps what is worth keeping between tasks of a persistent
worker (built solutions, the L2 flush buffer, environment) so a contestant iterating on one
kernel waits on the GPU, not on the harness. Anything the solution does wrong becomes a status
here (:mod:`.failures`); only a broken CUDA context marks the result ``fatal`` so the parent
replaces the worker. The phases with most to say have modules of their own: the input sets
(:mod:`.input_sets`), the reference in a trusted worker (:mod:`.reference_pass`) and the
timing (:mod:`.solution_timing`); the correctness run is here.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.evaluation.check import check_outputs, mutated_inputs, poison_
from fib_core.bench.evaluation.environment import EnvironmentInfo
from fib_core.bench.evaluation.failures import Failed, also, solution_traceback, tail
from fib_core.bench.evaluation.input_sets import Prepared, Staging, affordable_sets
from fib_core.bench.evaluation.inputs import generate_inputs, generate_timing_sets
from fib_core.bench.evaluation.phases import PhaseClock
from fib_core.bench.evaluation.protocol import EvalResult, EvalTask
from fib_core.bench.evaluation.reference import ReferenceCache, clone_args, reference_outputs
from fib_core.bench.evaluation.reference_pass import ReferencePass
from fib_core.bench.evaluation.reference_sets import checked_indices
from fib_core.bench.evaluation.solution_timing import SolutionTiming
from fib_core.bench.evaluation.timers import WALL_CLOCK_LABEL, L2Flusher
from fib_core.bench.evaluation.tolerance import resolve_tolerance
from fib_core.checking import CheckResult, Tolerance
from fib_core.compile.build import build as build_solution
from fib_core.data.definition import Definition
from fib_core.data.dtypes import torch_dtype
from fib_core.data.solution import Solution
from fib_core.data.trace import EvaluationStatus, Performance
from fib_core.data.workload import Workload
from fib_core.dataset.roofline import workload_cost
from fib_core.errors import BuildError, FibError, SignatureError

PhaseFn = Callable[[str], None]


class Evaluator:
    """Worker-side state plus the evaluation flow."""

    def __init__(self, device: str, env: EnvironmentInfo, phase: PhaseFn | None = None) -> None:
        self.device = device
        self.kind = device.split(":")[0]
        self.env = env
        self.phase = phase or (lambda name: None)
        self.ref_cache = ReferenceCache()
        self._builds: dict[str, Any] = {}  # solution hash -> Runnable or BuildError text
        self._flusher: L2Flusher | None = None
        self._warm_references: set[str] = set()  # definitions whose reference ran here
        # Set in a sandboxed worker: outputs go to the judge process, which alone holds the
        # reference outputs (see fib_core.bench.evaluation.judge); None = compare here (trusted use).
        self.remote_check: Callable[..., CheckResult] | None = None

    # --- entry point ---------------------------------------------------------------------

    def evaluate(self, task: EvalTask) -> EvalResult:
        definition = Definition.from_dict(task.definition)
        solution = Solution.from_dict(task.solution)
        workload = Workload.from_dict(task.workload)
        cfg = task.config
        extra: dict[str, Any] = {
            "seed": cfg.seed,
            "device": self.kind,
            "solution_hash": solution.hash(),
            "runner": "isolated" if cfg.isolated else "persistent",
            "warnings": [],
        }
        if self.kind != "cuda":
            extra["timing"] = WALL_CLOCK_LABEL
        if self.env.clocks:
            extra["clocks"] = dict(self.env.clocks)
        started = time.perf_counter()
        outer_phase, phases = self.phase, PhaseClock(started)
        self.phase = lambda name: (phases.enter(name), outer_phase(name))
        try:
            result = self._evaluate(definition, solution, workload, cfg, task, extra)
        except Failed as failed:
            corr = failed.correctness.to_dict() if failed.correctness is not None else None
            result = EvalResult(
                task.task_id, failed.status, failed.log, corr, None, extra, failed.fatal
            )
        finally:
            self.phase = outer_phase
            if self.remote_check is not None:
                self.remote_check.drain()  # verdicts of checks made after a failure
        extra["harness_seconds"] = round(time.perf_counter() - started, 3)
        extra["phase_seconds"] = phases.finish()
        if not extra["warnings"]:
            extra.pop("warnings")
        return result

    def close(self) -> None:
        for built in self._builds.values():
            if hasattr(built, "close"):
                built.close()
        self._builds.clear()

    # --- the flow ------------------------------------------------------------------------

    def _evaluate(
        self, definition, solution, workload, cfg: BenchmarkConfig, task, extra
    ) -> EvalResult:
        tol = resolve_tolerance(definition, cfg)
        extra["tolerance"] = tol.to_dict()
        self.phase("build")
        runnable = self._build(solution, definition, cfg)
        self.phase("inputs")
        prep = self._prepare(definition, workload, cfg, task.dataset_root)
        extra["num_input_sets"] = prep.total_sets
        extra["warnings"].extend(prep.notes)
        try:
            self.phase("run")
            check = self._correctness_run(definition, runnable, prep, tol, cfg, extra)
            self.phase("timing")
            prep.complete()
            timing = self._time_solution(definition, runnable, prep, tol, cfg)
        finally:
            prep.settle()
        extra["warnings"].extend(w for w in timing.warnings if w not in extra["warnings"])
        self.phase("reference-timing")
        if self.remote_check is not None:
            ref_ms, ref_extra = 0.0, {"measured_by": "judge"}  # the parent fills it in
        else:
            ref_ms, ref_extra = self._reference_latency(definition, workload, prep, cfg)

        perf_extra = timing.to_extra()
        perf_extra["reference_timing"] = ref_extra
        cost = _exact_cost(definition, prep)
        if cost is not None:
            perf_extra["cost"] = cost
        speedup = ref_ms / timing.latency_ms if timing.latency_ms > 0 and ref_ms > 0 else 0.0
        perf = Performance(timing.latency_ms, ref_ms, speedup, extra=perf_extra)
        log = check.message
        return EvalResult(
            task.task_id,
            EvaluationStatus.PASSED,
            log,
            check.correctness.to_dict(),
            perf.to_dict(),
            extra,
        )

    def _build(self, solution, definition, cfg: BenchmarkConfig) -> Any:
        key = solution.hash()
        built = self._builds.get(key)
        if built is None:
            try:
                built = build_solution(solution, definition, cfg.build_options)
            except (BuildError, SignatureError) as err:
                built = f"{type(err).__name__}: {err}"
            except FibError as err:
                built = str(err)
            self._builds[key] = built
        if isinstance(built, str):
            raise Failed(EvaluationStatus.COMPILE_ERROR, built)
        return built

    def _prepare(self, definition, workload, cfg: BenchmarkConfig, root: str | None) -> Prepared:
        notes: list[str] = []
        # Every set of this workload: one seed, one device, one cache of loaded blobs.
        common = dict(seed=cfg.seed, device=self.device, dataset_root=root, blob_cache={})
        sets, wanted, early = self._first_sets(definition, workload, cfg, common, notes)

        def make_more() -> list:
            return generate_timing_sets(
                definition, workload, first=early, count=wanted - early, **common
            )

        failed = definition.check_constraints(
            workload.axes, dict(zip(definition.input_names, sets[0], strict=True))
        )
        if failed:
            notes.append("workload violates constraint(s): " + "; ".join(failed))

        def compute_ref(k: int) -> list:
            with self._reference_errors():
                out, _ = reference_outputs(
                    definition,
                    workload,
                    sets[k],
                    seed=cfg.seed,
                    device=self.device,
                    input_set=k,
                    cache=self.ref_cache,
                )
            return out

        if self.remote_check is not None:
            refs, latency = {}, None  # the judge process holds the references (judge.py)
        else:
            self.phase("reference")
            # Every set a run may check (the checked sets and the re-check pool) goes through
            # the disk cache; the reference's latency comes from the calls that computed them.
            with self._reference_errors():
                refs, latency = self._references(definition, workload, sets, cfg)
        return Prepared(
            sets,
            refs,
            clone_args(sets[0]),
            [],
            dict(workload.axes),
            notes,
            # Judged remotely, the worker never computes a reference: no function that does
            # stays where the solution's call stack or the garbage collector could reach it.
            compute_ref if self.remote_check is None else None,
            latency,
            total_sets=wanted,
            make_more=make_more if early < wanted else None,
        )

    def _first_sets(self, definition, workload, cfg: BenchmarkConfig, common: dict,
                    notes: list[str]) -> tuple[list, int, int]:
        """The sets the judge may check, made now; with how many sets the run uses and how
        many of them these are (the rest are only ever timed, so a thread makes them during
        the correctness run: :meth:`Prepared.start_more`)."""
        try:
            sets = [generate_inputs(definition, workload, input_set=0, **common)]
            wanted = affordable_sets(sets[0], cfg, self.kind, notes)
            early = len(checked_indices(wanted, cfg.num_input_sets, cfg.num_trials))
            sets += [generate_inputs(definition, workload, input_set=k, **common)
                     for k in range(1, early)]
        except FibError as err:
            raise Failed(EvaluationStatus.RUNTIME_ERROR, f"inputs: {err}") from None
        return sets, wanted, early

    @contextmanager
    def _reference_errors(self):
        """A failing reference is RUNTIME_ERROR naming the reference, not the solution."""
        try:
            yield
        except Failed:
            raise
        except FibError as err:
            raise Failed(EvaluationStatus.RUNTIME_ERROR, f"reference: {err}") from None
        except Exception:
            raise Failed(
                EvaluationStatus.RUNTIME_ERROR,
                "reference failed (not the solution's fault):\n" + tail(traceback.format_exc()),
                fatal=self._cuda_broken(),
            ) from None

    def _references(self, definition, workload, sets: list, cfg: BenchmarkConfig):
        """Reference outputs of the checked sets and the re-check pool, and the reference's
        latency (:class:`~fib_core.bench.evaluation.reference_pass.ReferencePass`)."""
        return ReferencePass(self, definition, workload, sets, cfg).run()

    # --- correctness -----------------------------------------------------------------------

    def _call(self, runnable, inputs: list, outputs: list | None) -> tuple:
        """One solution call; exceptions become RUNTIME_ERROR (fatal if CUDA broke)."""
        try:
            result = runnable.run(inputs, outputs)
            self._sync()
            return result
        except SignatureError as err:
            raise Failed(EvaluationStatus.INCORRECT_SHAPE, str(err)) from None
        except Exception:
            fatal = self._cuda_broken()
            raise Failed(
                EvaluationStatus.RUNTIME_ERROR, solution_traceback(), fatal=fatal
            ) from None

    def _new_outputs(self, definition, prep: Prepared) -> list:
        # Imported here: torch takes ~3 s to load, and importing this module does not need it.
        import torch

        shapes = definition.output_shapes(prep.axes)
        outs = []
        for name, spec in definition.outputs.items():
            shape = shapes[name]
            if shape is None:
                outs.append(None)
                continue
            t = torch.empty(shape, dtype=torch_dtype(spec.dtype), device=self.device)
            outs.append(poison_(t))
        return outs

    def _correctness_run(
        self,
        definition,
        runnable,
        prep: Prepared,
        tol: Tolerance,
        cfg: BenchmarkConfig,
        extra: dict,
    ) -> CheckResult:
        """The first ``num_input_sets`` sets, each called once and checked before timing.

        Set 0's verdict is awaited alone: the judge's reference pass (the reference timed when
        its latency is not cached) runs on that first check, and nothing else of this workload
        may use the GPU meanwhile. Then the timing-only sets are made in a thread and the other
        sets' checks are pipelined (the next call runs while the judge compares); their
        verdicts are read in order, so the first failing set decides the status as if each had
        been checked before the next call.
        """
        outputs = self._new_outputs(definition, prep) if runnable.dps else None
        got = self._call(runnable, prep.working, outputs)
        changed = mutated_inputs(definition.input_names, prep.sets[0], prep.working)
        check = self._submit(definition, got, 0, prep, tol, "set")()
        self._settle_first(check, changed, cfg, extra)
        prep.start_more()
        pending = []
        try:
            for k in range(1, min(len(prep.sets), cfg.num_input_sets)):
                self._load_set(prep.working, prep.sets[k], range(len(prep.working)))
                got = self._call(
                    runnable,
                    prep.working,
                    self._new_outputs(definition, prep) if runnable.dps else None,
                )
                pending.append((k, self._submit(definition, got, k, prep, tol, "set")))
        except Failed as crash:
            try:
                self._settle_sets(pending)  # an earlier set's failure comes first
            except Failed as earlier:
                earlier.fatal = earlier.fatal or crash.fatal  # a broken context still ends it
                raise earlier from None
            raise
        self._settle_sets(pending)
        return check

    @staticmethod
    def _settle_first(
        check: CheckResult, changed: list[str], cfg: BenchmarkConfig, extra: dict
    ) -> None:
        """Raise if set 0 failed (its in-place input mutation included)."""
        if changed:
            extra["mutated_inputs"] = changed
            text = (
                f"the solution modified input(s) {', '.join(changed)} in place; inputs must "
                "be left unchanged"
            )
            if not cfg.allow_input_mutation:
                if check.passed or check.status is EvaluationStatus.INCORRECT_NUMERICAL:
                    raise Failed(
                        EvaluationStatus.INCORRECT_NUMERICAL,
                        text + also(check.message),
                        check.correctness,
                    )
                raise Failed(check.status.value, text + also(check.message))
            extra["warnings"].append(text)
        if not check.passed:
            raise Failed(check.status.value, check.message, check.correctness)

    @staticmethod
    def _settle_sets(pending: list) -> None:
        """The other checked sets' verdicts, in order: raise at the first failure."""
        for k, verdict in pending:
            other = verdict()
            if not other.passed:
                raise Failed(
                    other.status.value, f"input set {k}: {other.message}", other.correctness
                )

    def _submit(
        self, definition, got, k: int, prep: Prepared, tol: Tolerance, label: str
    ) -> Callable[[], CheckResult]:
        """Start checking a call's outputs on input set ``k``; the returned function gives the
        verdict. Judge checks are pipelined; a trusted, in-process check is made at once."""
        if self.remote_check is not None:
            return self.remote_check.submit(definition, got, k, prep, label)
        result = check_outputs(definition, got, prep.ref(k), tolerance=tol, inputs=prep.sets[k])
        return lambda: result

    @staticmethod
    def _load_set(working: list, source: Sequence, indices) -> None:
        """Make the call buffers ``working`` hold ``source``: tensors copied in place (the
        buffers keep their addresses), scalars swapped."""
        Staging(working, indices, None)(source)

    # --- timing ----------------------------------------------------------------------------

    def _time_solution(
        self, definition, runnable, prep: Prepared, tol: Tolerance, cfg: BenchmarkConfig
    ):
        """The solution timed, some timed calls re-checked
        (:class:`~fib_core.bench.evaluation.solution_timing.SolutionTiming`)."""
        return SolutionTiming(self, definition, runnable, prep, tol, cfg).run()

    def _reference_latency(self, definition, workload, prep: Prepared, cfg: BenchmarkConfig):
        """Reference latency: taken from the calls that produced the checked outputs (see
        :mod:`fib_core.bench.evaluation.reference_sets`), or cached from the run that made them."""
        if not cfg.profile_baseline or prep.ref_latency is None:
            return 0.0, {"skipped": True}
        return prep.ref_latency

    # --- device helpers ----------------------------------------------------------------------

    def _get_flusher(self) -> L2Flusher | None:
        if self.kind == "cuda" and self._flusher is None:
            self._flusher = L2Flusher(self.device)
        return self._flusher

    def _sync(self) -> None:
        if self.kind == "cuda":
            # Imported here: torch takes ~3 s to load, and importing this module does not need it.
            import torch

            torch.cuda.synchronize()

    def _cuda_broken(self) -> bool:
        """After an exception: can this process still use the GPU? (illegal address: no)."""
        if self.kind != "cuda":
            return False
        try:
            # Imported here: torch takes ~3 s to load, and importing this module does not need it.
            import torch

            torch.cuda.synchronize()
            torch.empty(1, device=self.device).add_(1).item()
            return False
        except Exception:
            return True


def _exact_cost(definition, prep: Prepared) -> dict[str, Any] | None:
    """Minimum bytes and FLOPs of this workload counted on its real inputs (routing, valid
    indices, lengths), for the report's roofline column; None for a definition without a model.
    """
    inputs = dict(zip(definition.input_names, prep.sets[0], strict=True))
    try:
        cost = workload_cost(definition.name, prep.axes, inputs)
    except Exception:  # the roofline column is informative: never fail a workload over it
        return None
    return {"bytes": int(cost.bytes), "flops": int(cost.flops), "dtype": cost.dtype}
