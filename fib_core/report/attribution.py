"""Name who failed: the solution, or the reference / input generation around it.

The worker reports the phase it was in when a workload ended (``start``, ``build``, ``inputs``,
``reference``, ``run``, ``timing``, ``reference-timing``). A TIMEOUT in ``reference`` or
``reference-timing`` means the *reference* was too slow for ``--timeout``, not the kernel: the
trace format has no status for that, so the status stays TIMEOUT, but the reason line says whose
phase it was and what to do. A reference that raised is reported likewise.

Example::

    reason_for("TIMEOUT", "timed out after 300 s for the workload, in phase 'reference-timing'")
    # -> "reference too slow, not your kernel: ..."
"""

from __future__ import annotations

import re

from fib_core.data.trace import EvaluationStatus

_TIMEOUT_PHASE = re.compile(r"timed out after ([\d.]+) s .*?in phase '([\w-]+)'")
NOT_SOLUTION_PHASES = {
    "start": "the worker's start-up",
    "inputs": "input generation",
    "reference": "the reference",
    "reference-timing": "timing the reference",
}


REFERENCE_PREFIXES = ("reference too slow, not your kernel", "reference failed, not your kernel")


def blames_reference(reason: str) -> bool:
    """True when a failure reason made by :func:`reason_for` names the reference."""
    return reason.startswith(REFERENCE_PREFIXES)


def failed_phase(log: str | None) -> tuple[str, float] | None:
    """(phase, seconds) of a timeout log line, or None."""
    match = _TIMEOUT_PHASE.search(log or "")
    if match is None:
        return None
    return match.group(2), float(match.group(1))


def reason_for(status: str, log: str | None) -> str | None:
    """A reason that names the reference as the culprit, or None when the solution failed."""
    if status == EvaluationStatus.TIMEOUT:
        found = failed_phase(log)
        if found is None or found[0] not in NOT_SOLUTION_PHASES:
            return None
        phase, seconds = found
        if phase == "start":
            return (
                f"the worker did not start within {seconds:g} s (not your kernel); the machine "
                "may be overloaded: retry, or raise --timeout"
            )
        return (
            f"reference too slow, not your kernel: {NOT_SOLUTION_PHASES[phase]} ran past "
            f"--timeout {seconds:g} s (phase '{phase}'); raise --timeout, or pick smaller "
            "workloads with --quick / --workloads"
        )
    if status == EvaluationStatus.RUNTIME_ERROR and "(not the solution's fault)" in (log or ""):
        return (
            "reference failed, not your kernel: the definition's reference raised (see the log); "
            "check the dataset and the inputs it generates"
        )
    return None
