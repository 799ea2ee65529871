"""The reference phase of an evaluation in a trusted worker: outputs of the checked sets, and
the reference's latency from the very calls that computed them.

Every set a run may check (the checked sets and the re-check pool) goes through the disk
cache; the reference's latency is timed as the solution's quantity (with torch's profiler
where that is CUPTI, outside ``--contest``:
:func:`fib_core.bench.evaluation.timers.reference_method`) and cached per GPU and method. In a
sandboxed run the judge process does this instead (:mod:`.judge`); the order of loads, calls
and stores is :func:`.reference_sets.run_references`'s.
"""

from __future__ import annotations

from typing import Any

from fib_core.bench import grading
from fib_core.bench.evaluation.reference import (
    clone_args,
    fast_reference_for,
    latency_key,
    reference_keys,
    reference_result,
)
from fib_core.bench.evaluation.reference_sets import (
    REFERENCE_TIMING_VERSION,
    checked_indices,
    run_references,
)
from fib_core.bench.evaluation.timers import measure, reference_method
from fib_core.dataset.references import reference_run


class ReferencePass:
    """One workload's reference outputs and latency, for the worker ``ev`` (an
    :class:`~fib_core.bench.evaluation.evaluator.Evaluator`: its device, reference cache,
    L2 flusher and the definitions whose reference already ran in this process)."""

    def __init__(self, ev: Any, definition: Any, workload: Any, sets: list, cfg: Any) -> None:
        self.ev, self.definition, self.workload, self.sets, self.cfg = (
            ev, definition, workload, sets, cfg)
        self.timed_calls = grading.eval_settings(definition.name).reference_timed_calls
        # With the judge's protocol (--contest) each trial times one set many times, and
        # with the judge's own CUPTI tracing.
        self.judge = cfg.extra.get("reference_protocol") == "judge"
        self.method, self.method_note = reference_method(cfg.timing_method, ev.kind, self.judge)
        self.exact_fn = reference_run(definition)
        self.fast_fn = fast_reference_for(definition.name)

    def run(self) -> tuple[dict[int, list], tuple[float, dict] | None]:
        """The checked sets' reference outputs, and (latency ms, extra) or None."""
        ev, definition, cfg = self.ev, self.definition, self.cfg
        lat_key = self._latency_key()
        cached = ev.ref_cache.load_latency(definition, lat_key) if cfg.profile_baseline else None
        indices = checked_indices(len(self.sets), cfg.num_input_sets, cfg.num_trials)
        keys = reference_keys(
            definition, self.workload, seed=cfg.seed, device_kind=ev.kind, input_sets=indices
        )
        key = dict(zip(indices, keys, strict=True)).__getitem__
        need_latency = cfg.profile_baseline and cached is None
        loaded = indices[self.timed_calls:] if need_latency else indices  # the timed: computed
        ev.ref_cache.prefetch_outputs(definition, [key(k) for k in loaded])
        try:
            run = run_references(
                indices,
                load=lambda k: ev.ref_cache.load_outputs(definition, key(k), ev.device),
                store=lambda k, out: ev.ref_cache.store_outputs(definition, key(k), out),
                measure_exact=self.measure_exact,
                exact=self.exact,
                fast=self.fast if self.fast_fn is not None else None,
                timed_calls=self.timed_calls,
                need_latency=need_latency,
            )
        finally:  # a prefetch never outlives its workload (nor serves bytes gone stale)
            ev.ref_cache.forget_prefetched()
        if cached is not None:
            return run.outputs, (float(cached["latency_ms"]), {**cached["extra"], "cached": True})
        if run.latency_ms is None:
            return run.outputs, None
        latency = (run.latency_ms, run.latency_extra)
        ev.ref_cache.store_latency(
            definition, lat_key, {"latency_ms": run.latency_ms, "extra": run.latency_extra}
        )
        return run.outputs, latency

    def _latency_key(self) -> str:
        """The cache key of the reference's latency: the workload, the GPU, how it is timed."""
        cfg = self.cfg
        timing: dict[str, Any] = {
            "version": REFERENCE_TIMING_VERSION,
            "method": self.method,
            "timed_calls": self.timed_calls,
            "protocol": cfg.extra.get("reference_protocol", "calls"),
        }
        if self.judge:
            timing["counts"] = [cfg.warmup_runs, cfg.iterations, cfg.num_trials]
        return latency_key(
            self.definition,
            self.workload,
            seed=cfg.seed,
            device_kind=self.ev.kind,
            hardware=self.ev.env.hardware,
            timing=timing,
        )

    def _counts(self, ks: list[int]) -> tuple[list[int], int, int]:
        """(timed sets, warm-up calls, timed calls per trial) for the sets ``ks``.

        The first call of a definition's reference in a process pays one-off costs (library
        handles, allocator growth, lazy imports): it runs once untimed, on set ks[0], and every
        later call, in this workload or the next ones, is timed."""
        cfg = self.cfg
        if self.judge:
            return ks[: cfg.num_trials], cfg.warmup_runs, cfg.iterations
        warm = self.definition.content_hash() in self.ev._warm_references
        return ks, 0 if warm else 1, len(ks)

    def measure_exact(self, ks: list[int]) -> tuple[dict[int, list], float, dict]:
        """The exact reference on the sets ``ks``, timed: their outputs, latency ms, extra."""
        definition, sets = self.definition, self.sets
        timed_sets, warmup, iterations = self._counts(ks)
        args: dict[int, list] = {}
        raws: dict[int, Any] = {}

        def set_of(i: int) -> int:
            if self.judge:
                return timed_sets[min(max(0, i - warmup) // iterations, len(timed_sets) - 1)]
            return ks[max(0, i - warmup)]

        def prepare(i: int) -> None:  # untimed: fresh clones of the call's set
            args.clear()
            args[i] = clone_args(sets[set_of(i)])

        def call(i: int) -> None:
            raws[set_of(i)] = self.exact_fn(*args[i])

        result = measure(
            call,
            prepare,
            device=self.ev.device,
            method=self.method,
            warmup=warmup,
            iterations=iterations,
            trials=len(timed_sets) if self.judge else 1,
            flusher=self.ev._get_flusher(),
            estimate=self.judge,
        )
        self.ev._warm_references.add(definition.content_hash())
        outputs = {k: reference_result(definition, raws[k]) for k in timed_sets}
        outputs.update({k: self.exact(k) for k in ks if k not in outputs})
        extra = result.to_extra()
        extra["protocol"] = "judge" if self.judge else "one call per set"
        if self.method_note:
            extra["method_note"] = self.method_note
        return outputs, result.latency_ms, extra

    def exact(self, k: int) -> list:
        """The exact reference's outputs on set ``k`` (untimed)."""
        return reference_result(self.definition, self.exact_fn(*clone_args(self.sets[k])))

    def fast(self, k: int) -> list:
        """The definition's fast reference's outputs on set ``k`` (same arithmetic, faster)."""
        out = self.fast_fn(*clone_args(self.sets[k]))
        return reference_result(self.definition, out, "the fast reference")
