"""One (solution, workload) evaluation inside a worker: build -> inputs -> reference -> check ->
time -> re-check -> reference latency.

Runs in the worker process only. Keeps what is worth keeping between tasks of a persistent
worker (built solutions, the L2 flush buffer, environment) so a contestant iterating on one
kernel waits on the GPU, not on the harness. Anything the solution does wrong becomes a status
here; only a broken CUDA context marks the result ``fatal`` so the parent replaces the worker.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.evaluation.check import (
    CheckResult,
    Tolerance,
    check_outputs,
    mutated_inputs,
    poison_,
    poison_value,
    resolve_tolerance,
)
from fib_core.bench.evaluation.environment import EnvironmentInfo
from fib_core.bench.evaluation.inputs import generate_inputs, generate_timing_sets
from fib_core.bench.evaluation.phases import PhaseClock
from fib_core.bench.evaluation.protocol import EvalResult, EvalTask
from fib_core.bench.evaluation.reference import (
    ReferenceCache,
    clone_args,
    latency_key,
    reference_keys,
    reference_outputs,
    reference_run,
)
from fib_core.bench.evaluation.reference_sets import checked_indices, timed_set_order
from fib_core.bench.evaluation.timers import (
    WALL_CLOCK_LABEL,
    L2Flusher,
    NoDeviceWork,
    choose_method,
    measure,
    reference_method,
    untimed_calls,
)
from fib_core.data.trace import EvaluationStatus
from fib_core.errors import BuildError, FibError, SignatureError

TRACEBACK_LINES = 25
# Distinct input sets made for timing at most (one per timed call when memory allows).
MAX_INPUT_SETS = 256
# Outputs of re-checked timed calls kept on the device, at most (the rest go to the host).
KEPT_ON_DEVICE_BYTES = 512 << 20
# Poisoned copies of a call's outputs kept to restore them in one batched copy, at most.
POISON_TEMPLATE_BYTES = 512 << 20
# Tensors larger than this are copied on their own before a timed call, not in a batched copy:
# the batched kernel is slower than a plain copy on large tensors. GPU time per copy on an
# H100: fp8 940 MB 2.45 ms against 0.65 ms (an MoE weight: 5 ms more per timed call), fp8
# 4 MB 20 us against 8 us, fp32/bf16 16 MB 1.6x, 4 MB 1.1-1.3x.
BATCHED_COPY_MAX_BYTES = 4 << 20
PhaseFn = Callable[[str], None]


class _Failed(Exception):
    """Ends an evaluation early with a status (raised inside, caught by :meth:`evaluate`)."""

    def __init__(
        self, status: EvaluationStatus, log: str, correctness: Any = None, fatal: bool = False
    ):
        super().__init__(log)
        self.status, self.log, self.correctness, self.fatal = status, log, correctness, fatal


@dataclass
class _Prepared:
    """Everything the solution calls need for one workload."""

    sets: list[list]  # pristine input sets
    refs: dict[int, list]  # reference outputs of the sets computed so far
    working: list  # the buffers the solution is called with
    rotating: list[int]  # inputs whose content differs between sets (set by complete())
    axes: dict[str, int]  # the workload's var-axis values
    notes: list[str] = field(default_factory=list)
    compute_ref: Callable[[int], list] | None = None  # reference of set k, on demand
    # (latency ms, extra) of the reference, from the calls that produced ``refs`` (or cached)
    ref_latency: tuple[float, dict] | None = None
    total_sets: int = 0  # the sets this run uses, counting those still being made
    make_more: Callable[[], list] | None = None  # makes the timing-only sets
    more: Callable[[], list] | None = None  # waits for the thread running ``make_more``

    def start_more(self) -> None:
        """Make the timing-only sets in a thread from now on (see :meth:`complete`)."""
        if self.make_more is not None:
            self.more, self.make_more = _in_thread(self.make_more), None

    def ref(self, k: int) -> list:
        """Reference outputs of input set ``k`` (the timed-only sets' are computed on demand)."""
        if k not in self.refs:
            assert self.compute_ref is not None
            self.refs[k] = self.compute_ref(k)
        return self.refs[k]

    def complete(self) -> None:
        """Before timing: add the timing-only sets once their thread is done, and find the
        inputs whose content differs between sets (recopied before each timed call)."""
        self.start_more()  # a no-op once the correctness run has started it
        if self.more is not None:
            more, self.more = self.more, None
            try:
                self.sets.extend(more())
            except Exception as err:  # as when the sets were made in the main thread
                text = str(err) if isinstance(err, FibError) else f"{type(err).__name__}: {err}"
                raise _Failed(EvaluationStatus.RUNTIME_ERROR, f"inputs: {text}") from None
        self.rotating = _rotating(self.sets)

    def settle(self) -> None:
        """Wait for the input thread of an evaluation that ended early (nothing outlives it);
        its sets and its error are no longer wanted."""
        more, self.more = self.more, None
        if more is not None:
            try:
                more()
            except BaseException:
                pass


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
        from fib_core.data.definition import Definition
        from fib_core.data.solution import Solution
        from fib_core.data.workload import Workload

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
        except _Failed as failed:
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
        from fib_core.data.trace import Performance

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
        from fib_core.compile.build import build as build_solution

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
            raise _Failed(EvaluationStatus.COMPILE_ERROR, built)
        return built

    def _prepare(self, definition, workload, cfg: BenchmarkConfig, root: str | None) -> _Prepared:
        notes: list[str] = []
        # Every set of this workload: one seed, one device, one cache of loaded blobs.
        common = dict(seed=cfg.seed, device=self.device, dataset_root=root, blob_cache={})

        def make(k: int) -> list:
            return generate_inputs(definition, workload, input_set=k, **common)

        try:
            sets = [make(0)]
            wanted = self._affordable_sets(sets[0], cfg, notes)
            # The sets the judge may check are made now; the rest are only ever timed, so a
            # thread makes them during the correctness run (:meth:`_Prepared.start_more`).
            early = len(checked_indices(wanted, cfg.num_input_sets, cfg.num_trials))
            sets += [make(k) for k in range(1, early)]
        except FibError as err:
            raise _Failed(EvaluationStatus.RUNTIME_ERROR, f"inputs: {err}") from None

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
        return _Prepared(
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

    @contextmanager
    def _reference_errors(self):
        """A failing reference is RUNTIME_ERROR naming the reference, not the solution."""
        try:
            yield
        except _Failed:
            raise
        except FibError as err:
            raise _Failed(EvaluationStatus.RUNTIME_ERROR, f"reference: {err}") from None
        except Exception:
            raise _Failed(
                EvaluationStatus.RUNTIME_ERROR,
                "reference failed (not the solution's fault):\n" + _tail(traceback.format_exc()),
                fatal=self._cuda_broken(),
            ) from None

    def _references(self, definition, workload, sets: list, cfg: BenchmarkConfig):
        """Reference outputs of the checked sets and the re-check pool (disk-cached), and the
        reference latency from the calls that computed them, timed as the solution's quantity
        (:func:`fib_core.bench.evaluation.timers.reference_method`; cached per GPU and method)."""
        from fib_core.bench.evaluation.reference import fast_reference_for, reference_result
        from fib_core.bench.evaluation.reference_sets import (
            REFERENCE_TIMING_VERSION,
            checked_indices,
            run_references,
        )
        from fib_core.bench.grading import eval_settings

        timed_calls = eval_settings(definition.name).reference_timed_calls
        method, method_note = reference_method(cfg.timing_method, self.kind)
        lat_key = latency_key(
            definition,
            workload,
            seed=cfg.seed,
            device_kind=self.kind,
            hardware=self.env.hardware,
            timing={
                "version": REFERENCE_TIMING_VERSION,
                "method": method,
                "timed_calls": timed_calls,
                "protocol": cfg.extra.get("reference_protocol", "calls"),
                **(
                    {"counts": [cfg.warmup_runs, cfg.iterations, cfg.num_trials]}
                    if cfg.extra.get("reference_protocol") == "judge"
                    else {}
                ),
            },
        )
        cached_latency = None
        if cfg.profile_baseline:
            cached_latency = self.ref_cache.load_latency(definition, lat_key)
        exact_fn = reference_run(definition)
        fast_fn = fast_reference_for(definition.name)

        judge = cfg.extra.get("reference_protocol") == "judge"

        def measure_exact(ks: list[int]):
            # The first call of a definition's reference in a process pays one-off costs
            # (library handles, allocator growth, lazy imports): it runs once untimed, on set
            # ks[0], and every later call, in this workload or the next ones, is timed.
            # With the judge's protocol (--contest) each trial times one set many times.
            if judge:
                timed_sets = ks[: cfg.num_trials]
                warmup, iterations = cfg.warmup_runs, cfg.iterations
            else:
                timed_sets = ks
                warmup = 0 if definition.content_hash() in self._warm_references else 1
                iterations = len(ks)
            args: dict[int, list] = {}
            raws: dict[int, Any] = {}

            def set_of(i: int) -> int:
                if judge:
                    return timed_sets[min(max(0, i - warmup) // iterations, len(timed_sets) - 1)]
                return ks[max(0, i - warmup)]

            def prepare(i: int) -> None:  # untimed: fresh clones of the call's set
                args.clear()
                args[i] = clone_args(sets[set_of(i)])

            def call(i: int) -> None:
                raws[set_of(i)] = exact_fn(*args[i])

            result = measure(
                call,
                prepare,
                device=self.device,
                method=method,
                warmup=warmup,
                iterations=iterations,
                trials=len(timed_sets) if judge else 1,
                flusher=self._get_flusher(),
                estimate=judge,
            )
            self._warm_references.add(definition.content_hash())
            outputs = {k: reference_result(definition, raws[k]) for k in timed_sets}
            outputs.update({k: exact(k) for k in ks if k not in outputs})
            extra = result.to_extra()
            extra["protocol"] = "judge" if judge else "one call per set"
            if method_note:
                extra["method_note"] = method_note
            return outputs, result.latency_ms, extra

        def exact(k: int) -> list:
            return reference_result(definition, exact_fn(*clone_args(sets[k])))

        def fast(k: int) -> list:
            return reference_result(definition, fast_fn(*clone_args(sets[k])), "the fast reference")

        indices = checked_indices(len(sets), cfg.num_input_sets, cfg.num_trials)
        keys = reference_keys(
            definition, workload, seed=cfg.seed, device_kind=self.kind, input_sets=indices
        )
        key = dict(zip(indices, keys, strict=True)).__getitem__
        need_latency = cfg.profile_baseline and cached_latency is None
        loaded = indices[timed_calls:] if need_latency else indices  # the timed: computed
        self.ref_cache.prefetch_outputs(definition, [key(k) for k in loaded])
        try:
            run = run_references(
                indices,
                load=lambda k: self.ref_cache.load_outputs(definition, key(k), self.device),
                store=lambda k, out: self.ref_cache.store_outputs(definition, key(k), out),
                measure_exact=measure_exact,
                exact=exact,
                fast=fast if fast_fn is not None else None,
                timed_calls=timed_calls,
                need_latency=need_latency,
            )
        finally:  # a prefetch never outlives its workload (nor serves bytes gone stale)
            self.ref_cache.forget_prefetched()
        latency = None
        if cached_latency is not None:
            latency = (
                float(cached_latency["latency_ms"]),
                {**cached_latency["extra"], "cached": True},
            )
        elif run.latency_ms is not None:
            latency = (run.latency_ms, run.latency_extra)
            self.ref_cache.store_latency(
                definition, lat_key, {"latency_ms": run.latency_ms, "extra": run.latency_extra}
            )
        return run.outputs, latency

    def _affordable_sets(self, first: Sequence, cfg: BenchmarkConfig, notes: list[str]) -> int:
        """How many input sets to make: the ``num_input_sets`` checked before timing, plus one
        per call made while timing (warm-up included), so no input content repeats and a kernel
        replaying results by content gains nothing; never more than ``input_memory_fraction``
        of free memory."""
        if cfg.num_input_sets == 1:
            return 1
        per_trial = untimed_calls(cfg.warmup_runs, self.kind) + cfg.iterations
        target = min(MAX_INPUT_SETS, cfg.num_input_sets + per_trial * cfg.num_trials)
        size = sum(v.numel() * v.element_size() for v in first if _is_tensor(v))
        if size == 0:
            return target
        free = _free_memory(self.kind)
        fit = max(1, int(cfg.input_memory_fraction * free // size) - 1)  # one more: working copy
        if fit < cfg.num_input_sets:
            notes.append(f"only {fit} input set(s) fit in memory (asked {cfg.num_input_sets})")
        return min(fit, target)

    # --- correctness -----------------------------------------------------------------------

    def _call(self, runnable, inputs: list, outputs: list | None) -> tuple:
        """One solution call; exceptions become RUNTIME_ERROR (fatal if CUDA broke)."""
        try:
            result = runnable.run(inputs, outputs)
            self._sync()
            return result
        except SignatureError as err:
            raise _Failed(EvaluationStatus.INCORRECT_SHAPE, str(err)) from None
        except Exception:
            fatal = self._cuda_broken()
            raise _Failed(
                EvaluationStatus.RUNTIME_ERROR, _solution_traceback(), fatal=fatal
            ) from None

    def _new_outputs(self, definition, prep: _Prepared) -> list:
        import torch

        from fib_core.data.dtypes import torch_dtype

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
        prep: _Prepared,
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
        except _Failed as crash:
            try:
                self._settle_sets(pending)  # an earlier set's failure comes first
            except _Failed as earlier:
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
                    raise _Failed(
                        EvaluationStatus.INCORRECT_NUMERICAL,
                        text + _join(check.message),
                        check.correctness,
                    )
                raise _Failed(check.status.value, text + _join(check.message))
            extra["warnings"].append(text)
        if not check.passed:
            raise _Failed(check.status.value, check.message, check.correctness)

    @staticmethod
    def _settle_sets(pending: list) -> None:
        """The other checked sets' verdicts, in order: raise at the first failure."""
        for k, verdict in pending:
            other = verdict()
            if not other.passed:
                raise _Failed(
                    other.status.value, f"input set {k}: {other.message}", other.correctness
                )

    def _submit(
        self, definition, got, k: int, prep: _Prepared, tol: Tolerance, label: str
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
        _Staging(working, indices, None)(source)

    # --- timing ----------------------------------------------------------------------------

    def _time_solution(
        self, definition, runnable, prep: _Prepared, tol: Tolerance, cfg: BenchmarkConfig
    ):
        import torch

        method, notes = choose_method(cfg.timing_method, self.kind)
        outputs = self._new_outputs(definition, prep) if runnable.dps else None
        n_sets = len(prep.sets)
        last: list[Any] = [None]
        recopy = list(range(len(prep.working))) if cfg.allow_input_mutation else prep.rotating

        # Besides the last call of each trial, one call per trial chosen at random (from the
        # OS's entropy, so a kernel cannot predict it) has its outputs kept and re-checked: a
        # kernel that only computes now and then, or replays results cached by pointer or by
        # input content, is caught on whichever call is sampled.
        rng = random.Random(os.urandom(8))
        first = cfg.warmup_runs
        sampled = {
            first + t * cfg.iterations + rng.randrange(max(cfg.iterations - 1, 1))
            for t in range(cfg.num_trials)
        }
        kept: dict[int, tuple] = {}
        # Re-checked calls get the re-check pool's sets (their references are on disk after the
        # first run); the other calls take fresh sets, so no content repeats when memory allows.
        last_calls = [first + (t + 1) * cfg.iterations - 1 for t in range(cfg.num_trials)]
        # The untimed calls (the judge's estimate and warm-up, per trial) come after the timed
        # ones in index order, each with a set of its own where memory allows.
        untimed = untimed_calls(cfg.warmup_runs, self.kind)
        end_timed = first + cfg.iterations * cfg.num_trials
        order = timed_set_order(
            n_sets,
            min(cfg.num_input_sets, n_sets),
            sorted(set(last_calls) | sampled),
            end_timed + untimed * cfg.num_trials,
        )

        def set_of(i: int) -> int:
            return order[i]

        stage = _Staging(prep.working, recopy, outputs)

        def prepare(i: int) -> None:
            if i - 1 in sampled and last[0] is not None:
                # Untimed device copies of call i-1's outputs, before they are poisoned.
                kept[i - 1] = tuple(_copy(t) for t in last[0])
            stage(prep.sets[set_of(i)])

        def call(i: int) -> None:
            last[0] = runnable.run(prep.working, outputs)

        # Checked after the last trial, so the judge never uses the GPU while calls are timed.
        deferred: list[tuple[int, int, tuple]] = []  # (trial, call index, copy of its outputs)

        kept_bytes = [0]

        def keep(got: tuple, copied: bool) -> tuple:
            # Device copies go straight from the device to the judge's shared buffer at the
            # end; past KEPT_ON_DEVICE_BYTES the copies go to the host, so device memory stays
            # bounded whatever the number of trials. (A fresh host copy costs ten times a
            # device one: 30 ms for a 33.5 MB decode state on an H100.)
            size = sum(t.numel() * t.element_size() for t in got if type(t) is torch.Tensor)
            if kept_bytes[0] + size <= KEPT_ON_DEVICE_BYTES:
                try:
                    kept = got if copied else tuple(_copy(t) for t in got)
                    kept_bytes[0] += size
                    return kept
                except RuntimeError:  # out of device memory (the solution's workspace): host
                    pass
            return tuple(_to_host(t) for t in got)

        def after_trial(trial: int, index: int) -> None:
            self._sync()
            deferred.append((trial, index, keep(last[0], copied=False)))
            deferred.extend((trial, i, keep(got, True)) for i, got in sorted(kept.items()))
            kept.clear()

        def settle_timed() -> None:
            pending = [
                (trial, i, self._submit(definition, got, set_of(i), prep, tol, "timed"))
                for trial, i, got in deferred
            ]
            deferred.clear()
            for trial, i, verdict in pending:
                check = verdict()
                if not check.passed:
                    raise _Failed(
                        check.status.value,
                        f"outputs of timed call {i} (input set {set_of(i)}, trial {trial}) "
                        "differ from the reference; a kernel must compute every call, not reuse "
                        f"results: {check.message}",
                        check.correctness,
                    )

        try:
            result = measure(
                call,
                prepare,
                device=self.device,
                method=method,
                warmup=cfg.warmup_runs,
                iterations=cfg.iterations,
                trials=cfg.num_trials,
                after_trial=after_trial,
                flusher=self._get_flusher(),
                untimed_index=lambda t, k: end_timed + t * untimed + k,
            )
        except _Failed:
            raise
        except NoDeviceWork as err:
            raise _Failed(EvaluationStatus.RUNTIME_ERROR, str(err)) from None
        except SignatureError as err:
            settle_timed()  # a finished trial's wrong outputs came first
            raise _Failed(EvaluationStatus.INCORRECT_SHAPE, str(err)) from None
        except Exception:
            text = "during timing:\n" + _solution_traceback()
            fatal = self._cuda_broken()
            if not fatal:
                settle_timed()  # a finished trial's wrong outputs came first
            raise _Failed(EvaluationStatus.RUNTIME_ERROR, text, fatal=fatal) from None
        settle_timed()
        result.warnings[:0] = notes
        return result

    def _reference_latency(self, definition, workload, prep: _Prepared, cfg: BenchmarkConfig):
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
            import torch

            torch.cuda.synchronize()

    def _cuda_broken(self) -> bool:
        """After an exception: can this process still use the GPU? (illegal address: no)."""
        if self.kind != "cuda":
            return False
        try:
            import torch

            torch.cuda.synchronize()
            torch.empty(1, device=self.device).add_(1).item()
            return False
        except Exception:
            return True


def _exact_cost(definition, prep: _Prepared) -> dict[str, Any] | None:
    """Minimum bytes and FLOPs of this workload counted on its real inputs (routing, valid
    indices, lengths), for the report's roofline column; None for a definition without a model.
    """
    from fib_core.dataset.roofline import workload_cost

    inputs = dict(zip(definition.input_names, prep.sets[0], strict=True))
    try:
        cost = workload_cost(definition.name, prep.axes, inputs)
    except Exception:  # the roofline column is informative: never fail a workload over it
        return None
    return {"bytes": int(cost.bytes), "flops": int(cost.flops), "dtype": cost.dtype}


def _free_memory(kind: str) -> int:
    if kind == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info()
        return int(free)
    import os

    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError):
        return 8 << 30


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "data_ptr") and hasattr(value, "copy_")


def _copy(value: Any) -> Any:
    """A device copy of a tensor output (later calls may reuse its buffer); other values as is.

    Only a plain ``torch.Tensor`` is copied, by torch's own method: a subclass could compute
    its content when copied, outside the timed call (the judge refuses subclasses anyway).
    """
    import torch

    return torch.Tensor.clone(value) if type(value) is torch.Tensor else value


def _to_host(value: Any) -> Any:
    """A host copy of a plain tensor output (always a copy, even of a CPU tensor, whose buffer
    later calls may reuse); other values as is (see :func:`_copy`)."""
    import torch

    if type(value) is torch.Tensor:
        return torch.Tensor.to(value, "cpu", copy=True)
    return value


class _Staging:
    """Puts an input set into the call buffers and poisons the outputs before a call, in one
    batched device copy per dtype (tensors over :data:`BATCHED_COPY_MAX_BYTES`, or alone in
    their dtype, get a plain copy each).

    Under the profiler every operation and every kernel costs host time, and a kernel of a
    few microseconds is timed 160 times per workload. Measured on an H100 (GDN decode, 8
    inputs and 2 outputs copied): 0.63 ms of host time per timed call with one copy per
    tensor (10 kernels), the same with one ``torch._foreach_copy_`` over mixed dtypes (it
    falls back to a copy per tensor), 0.33 ms with one per dtype (2 kernels). The outputs are
    poisoned by copying from poisoned templates made once, so the poisoning joins the same
    copies (up to :data:`POISON_TEMPLATE_BYTES`; larger outputs are filled one by one).
    """

    def __init__(self, working: list, indices: Sequence[int], outputs: list | None) -> None:
        self.working = working
        self.tensors = [j for j in indices if _is_tensor(working[j])]
        self.scalars = [j for j in indices if not _is_tensor(working[j])]
        poisoned = [t for t in outputs or () if t is not None and poison_value(t.dtype) is not None]
        size = sum(t.numel() * t.element_size() for t in poisoned)
        self.templates = []
        if size <= POISON_TEMPLATE_BYTES:
            try:
                self.templates = [poison_(_copy(t)) for t in poisoned]
            except RuntimeError:  # out of device memory: fill the outputs one by one instead
                self.templates = []
        self.filled = [] if self.templates else poisoned
        self.targets = [working[j] for j in self.tensors] + (poisoned if self.templates else [])
        # Positions in ``targets`` by (dtype, device): one batched copy each. A large tensor
        # is a group of its own, copied by ``copy_`` (its launch cost is nothing against its
        # bytes, and the batched kernel is slower on it: see BATCHED_COPY_MAX_BYTES).
        groups: dict[tuple[str, ...], list[int]] = {}
        for position, target in enumerate(self.targets):
            alone = target.numel() * target.element_size() > BATCHED_COPY_MAX_BYTES
            key = ("alone", str(position)) if alone else (str(target.dtype), str(target.device))
            groups.setdefault(key, []).append(position)
        self.groups = [
            ([self.targets[p] for p in positions], positions) for positions in groups.values()
        ]
        self.one_by_one: set[int] = set()  # groups whose dtype the batched copy refused

    def __call__(self, source: Sequence) -> None:
        sources = [source[j] for j in self.tensors] + self.templates
        for g, (targets, positions) in enumerate(self.groups):
            if len(targets) == 1:  # nothing to batch: one plain copy
                targets[0].copy_(sources[positions[0]])
                continue
            group_sources = [sources[p] for p in positions]
            if not copy_all(targets, group_sources, batched=g not in self.one_by_one):
                self.one_by_one.add(g)  # not asked again: a refusal costs an exception
        for j in self.scalars:
            self.working[j] = source[j]
        for t in self.filled:
            poison_(t)


def copy_all(targets: list, sources: list, batched: bool = True) -> bool:
    """``targets[i].copy_(sources[i])`` for every i, as one batched operation when torch has
    one (``torch._foreach_copy_``: one kernel when the tensors share a dtype and device) and
    ``batched``, else one by one; True when it was batched. The batched copy's GPU path does
    not know every dtype (fp4; fp8 before torch 2.5): what it refuses is copied one by one,
    as ``copy_`` copies any dtype.

    Example: ``copy_all([a, b], [x, y])`` leaves ``a`` equal to ``x`` and ``b`` to ``y``."""
    import torch

    foreach = getattr(torch, "_foreach_copy_", None) if batched else None
    if foreach is not None and targets:
        try:
            foreach(targets, sources)
            return True
        except (RuntimeError, NotImplementedError):
            pass  # nothing was copied: it refuses before launching
    for target, source in zip(targets, sources, strict=True):
        target.copy_(source)
    return False


def _rotating(sets: list) -> list[int]:
    """Indices of the inputs whose content differs between sets (recopied before each call)."""
    return [
        j
        for j in range(len(sets[0]))
        if any(s[j] is not sets[0][j] for s in sets[1:])
        and (_is_tensor(sets[0][j]) or any(s[j] != sets[0][j] for s in sets[1:]))
    ]


def _in_thread(work: Callable[[], list]) -> Callable[[], list]:
    """Start ``work`` in a thread; the returned function waits for it and gives its result
    (or raises its error). Torch releases the GIL inside its operations, so the thread makes
    progress while the main thread waits on the GPU or the judge."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as err:  # re-raised in the waiting thread
            box["error"] = err

    thread = threading.Thread(target=run, name="input-sets", daemon=True)
    thread.start()

    def wait() -> list:
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["result"]

    return wait


_KIT_DIR = str(Path(__file__).resolve().parents[1])


def _solution_traceback() -> str:
    """The current exception's traceback without the kit's own frames (the solution's and the
    libraries' frames are what a contestant can act on)."""
    exc_type, exc, tb = sys.exc_info()
    frames = traceback.extract_tb(tb)
    kept = [f for f in frames if not f.filename.startswith(_KIT_DIR)] or frames
    lines = [
        "Traceback (most recent call last):\n",
        *traceback.format_list(kept),
        *traceback.format_exception_only(exc_type, exc),
    ]
    return _tail("".join(lines))


def _tail(text: str, lines: int = TRACEBACK_LINES) -> str:
    parts = text.rstrip().splitlines()
    if len(parts) > lines:
        parts = ["..."] + parts[-lines:]
    return "\n".join(parts)


def _join(message: str) -> str:
    return f"; also: {message}" if message else ""
