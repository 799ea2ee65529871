"""The timing phase of an evaluation: the solution timed as the judge times it, and some of its
timed calls checked again afterwards.

Besides the last call of each trial, one call per trial chosen at random (from the OS's
entropy, so a kernel cannot predict it) has its outputs kept and re-checked: a kernel that only
computes now and then, or replays results cached by pointer or by input content, is caught on
whichever call is sampled. The checks wait until the last trial is done, so the judge never
uses the GPU while calls are timed.
"""

from __future__ import annotations

import os
import random
from typing import Any

from fib_core.bench.evaluation.failures import Failed, solution_traceback
from fib_core.bench.evaluation.input_sets import Staging, copy_output, to_host
from fib_core.bench.evaluation.reference_sets import timed_set_order
from fib_core.bench.evaluation.timer_methods import NoDeviceWork
from fib_core.bench.evaluation.timers import choose_method, measure, untimed_calls
from fib_core.data.trace import EvaluationStatus
from fib_core.errors import SignatureError

# Outputs of re-checked timed calls kept on the device, at most (the rest go to the host).
KEPT_ON_DEVICE_BYTES = 512 << 20


class SolutionTiming:
    """One workload's timing for the worker ``ev`` (an
    :class:`~fib_core.bench.evaluation.evaluator.Evaluator`), on the input sets of ``prep``."""

    def __init__(self, ev: Any, definition: Any, runnable: Any, prep: Any, tol: Any,
                 cfg: Any) -> None:
        self.ev, self.definition, self.runnable, self.prep, self.tol, self.cfg = (
            ev, definition, runnable, prep, tol, cfg)
        self.outputs = ev._new_outputs(definition, prep) if runnable.dps else None
        self.last: Any = None  # the outputs of the latest call
        recopy = list(range(len(prep.working))) if cfg.allow_input_mutation else prep.rotating
        self.stage = Staging(prep.working, recopy, self.outputs)
        self.kept: dict[int, tuple] = {}  # sampled calls of this trial: copies of their outputs
        # Checked after the last trial: (trial, call index, copy of its outputs).
        self.deferred: list[tuple[int, int, tuple]] = []
        self.kept_bytes = 0
        self._plan()

    def _plan(self) -> None:
        """Which calls are re-checked, and which input set each call takes."""
        cfg, n_sets = self.cfg, len(self.prep.sets)
        rng = random.Random(os.urandom(8))
        first = cfg.warmup_runs
        self.sampled = {
            first + t * cfg.iterations + rng.randrange(max(cfg.iterations - 1, 1))
            for t in range(cfg.num_trials)
        }
        # Re-checked calls get the re-check pool's sets (their references are on disk after
        # the first run); the other calls take fresh sets, so no content repeats when memory
        # allows.
        last_calls = [first + (t + 1) * cfg.iterations - 1 for t in range(cfg.num_trials)]
        # The untimed calls (the judge's estimate and warm-up, per trial) come after the timed
        # ones in index order, each with a set of its own where memory allows.
        self.untimed = untimed_calls(cfg.warmup_runs, self.ev.kind)
        self.end_timed = first + cfg.iterations * cfg.num_trials
        self.order = timed_set_order(
            n_sets,
            min(cfg.num_input_sets, n_sets),
            sorted(set(last_calls) | self.sampled),
            self.end_timed + self.untimed * cfg.num_trials,
        )

    def run(self) -> Any:
        """The :class:`~fib_core.bench.evaluation.timers.TimingResult`; raises
        :class:`~fib_core.bench.evaluation.failures.Failed` for a call that failed or a
        re-checked call whose outputs were wrong."""
        cfg = self.cfg
        method, notes = choose_method(cfg.timing_method, self.ev.kind)
        try:
            result = measure(
                self.call,
                self.prepare,
                device=self.ev.device,
                method=method,
                warmup=cfg.warmup_runs,
                iterations=cfg.iterations,
                trials=cfg.num_trials,
                after_trial=self.after_trial,
                flusher=self.ev._get_flusher(),
                untimed_index=lambda t, k: self.end_timed + t * self.untimed + k,
            )
        except Failed:
            raise
        except NoDeviceWork as err:
            raise Failed(EvaluationStatus.RUNTIME_ERROR, str(err)) from None
        except SignatureError as err:
            self.settle()  # a finished trial's wrong outputs came first
            raise Failed(EvaluationStatus.INCORRECT_SHAPE, str(err)) from None
        except Exception:
            text = "during timing:\n" + solution_traceback()
            fatal = self.ev._cuda_broken()
            if not fatal:
                self.settle()  # a finished trial's wrong outputs came first
            raise Failed(EvaluationStatus.RUNTIME_ERROR, text, fatal=fatal) from None
        self.settle()
        result.warnings[:0] = notes
        return result

    def prepare(self, i: int) -> None:
        """Before call ``i``, untimed: keep call i-1's outputs if sampled, stage call i's set."""
        if i - 1 in self.sampled and self.last is not None:
            # Untimed device copies of call i-1's outputs, before they are poisoned.
            self.kept[i - 1] = tuple(copy_output(t) for t in self.last)
        self.stage(self.prep.sets[self.order[i]])

    def call(self, i: int) -> None:
        self.last = self.runnable.run(self.prep.working, self.outputs)

    def keep(self, got: tuple, copied: bool) -> tuple:
        """A call's outputs, kept for the check after the last trial.

        Device copies go straight from the device to the judge's shared buffer at the end;
        past KEPT_ON_DEVICE_BYTES the copies go to the host, so device memory stays bounded
        whatever the number of trials. (A fresh host copy costs ten times a device one: 30 ms
        for a 33.5 MB decode state on an H100.)"""
        # Imported here: torch takes ~3 s to load, and importing this module does not need it.
        import torch

        size = sum(t.numel() * t.element_size() for t in got if type(t) is torch.Tensor)
        if self.kept_bytes + size <= KEPT_ON_DEVICE_BYTES:
            try:
                kept = got if copied else tuple(copy_output(t) for t in got)
                self.kept_bytes += size
                return kept
            except RuntimeError:  # out of device memory (the solution's workspace): host
                pass
        return tuple(to_host(t) for t in got)

    def after_trial(self, trial: int, index: int) -> None:
        self.ev._sync()
        self.deferred.append((trial, index, self.keep(self.last, copied=False)))
        self.deferred.extend((trial, i, self.keep(got, True)) for i, got in sorted(self.kept.items()))
        self.kept.clear()

    def settle(self) -> None:
        """Check the kept outputs against the references of their sets; raise at the first
        that differs."""
        submit = self.ev._submit
        pending = [
            (trial, i, submit(self.definition, got, self.order[i], self.prep, self.tol, "timed"))
            for trial, i, got in self.deferred
        ]
        self.deferred.clear()
        for trial, i, verdict in pending:
            check = verdict()
            if not check.passed:
                raise Failed(
                    check.status.value,
                    f"outputs of timed call {i} (input set {self.order[i]}, trial {trial}) "
                    "differ from the reference; a kernel must compute every call, not reuse "
                    f"results: {check.message}",
                    check.correctness,
                )
