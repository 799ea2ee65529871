"""Correctness: the organizers' rule, plus the checks they are blind to.

An element fails only if it exceeds *both* atol and rtol (|x - y| > atol and
|x - y| / (|y| + 1e-8) > rtol, both sides in fp32); an output passes when the fraction of
matching elements reaches ``required_matched_ratio``; shape and dtype must match exactly. On top
of that: NaN anywhere (either side) fails and is reported, an inf only matches the same inf,
unwritten DPS outputs are caught by poisoning them first (:func:`poison_`), and an input the
solution modified in place is reported (:func:`mutated_inputs`).

The verdict (``CheckResult``), ``Tolerance`` and the element rule are
:mod:`fib_core.checking`'s (definition folders use them too); where tolerances come from is
:mod:`.tolerance`'s; one output's element-wise comparison and the strict view are
:mod:`.compare`'s.

Definitions whose outputs are not comparable index by index (e.g. a top-k index list with ties)
have a ``checker.py`` in their definition folder (or register one with :func:`register_checker`);
it runs after the shape and dtype checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fib_core.bench.evaluation.compare import compare_scalar, compare_tensor
from fib_core.checking import CheckResult, Tolerance
from fib_core.dataset import registry

if TYPE_CHECKING:
    import torch

    from fib_core.data.definition import Definition

CheckerFn = Callable[..., CheckResult]
_CHECKERS: dict[str, CheckerFn] = {}


def register_checker(name: str) -> Callable[[CheckerFn], CheckerFn]:
    """Decorator: ``fn(definition, outputs, reference, inputs, tolerance) -> CheckResult``.

    ``name`` is a definition name, or a checker kind a definition declares with
    ``"checker": "<kind>"`` in its JSON (the declared kind is looked up first). ``outputs`` and
    ``reference`` map output names to tensors whose shapes and dtypes already match;
    ``inputs`` maps input names to what the solution received.
    """

    def decorator(fn: CheckerFn) -> CheckerFn:
        _CHECKERS[name] = fn
        return fn

    return decorator


def checker_for(definition: Definition) -> tuple[str, CheckerFn | None]:
    """(checker name, function) for a definition; ("elementwise", None) for the default rule.

    Looked up in order: a kind the definition declares (registered here, or listed in a
    definition folder's ``checker.py`` ``KINDS``), a checker registered under its name, its
    definition folder's ``checker.py``."""
    kind = definition.extra.get("checker")
    if isinstance(kind, str):
        if kind in _CHECKERS:
            return kind, _CHECKERS[kind]
        for entry in registry.entries():
            module = entry.module("checker")
            if module is not None and kind in getattr(module, "KINDS", ()):
                return kind, entry.checker
    if definition.name in _CHECKERS:
        return definition.name, _CHECKERS[definition.name]
    entry = registry.get(definition.name)
    if entry is not None and entry.checker is not None:
        return definition.name, entry.checker
    return "elementwise", None


# --- structure: count, shape, dtype ----------------------------------------------------------


def check_structure(
    definition: Definition, outputs: Sequence, reference: Sequence, device: str | None = None
) -> CheckResult | None:
    """A failed CheckResult when count, type, shape or dtype differ; None when all agree.

    ``device`` names the inputs' device in messages when ``reference`` holds only stand-ins
    (the worker checks structure against shapes on the meta device, never real outputs).
    """
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    # Imported here: fib_core.data.dtypes loads pydantic (~50 ms); this module's import does not.
    from fib_core.data.dtypes import dtype_name
    from fib_core.data.trace import EvaluationStatus

    names = definition.output_names
    if len(outputs) != len(names):
        return CheckResult(
            EvaluationStatus.INCORRECT_SHAPE,
            None,
            f"the solution returned {len(outputs)} output(s), expected {len(names)} "
            f"({', '.join(names)})",
        )
    for name, got, want in zip(names, outputs, reference, strict=True):
        if not isinstance(want, torch.Tensor):
            continue  # a scalar output: compared by value later
        if not isinstance(got, torch.Tensor):
            return CheckResult(
                EvaluationStatus.INCORRECT_SHAPE,
                None,
                f"output {name!r} is a {type(got).__name__}, expected a tensor of shape "
                f"{tuple(want.shape)}",
            )
        if tuple(got.shape) != tuple(want.shape):
            return CheckResult(
                EvaluationStatus.INCORRECT_SHAPE,
                None,
                f"output {name!r} has shape {tuple(got.shape)}, expected {tuple(want.shape)}",
            )
        if got.dtype != want.dtype:
            return CheckResult(
                EvaluationStatus.INCORRECT_DTYPE,
                None,
                f"output {name!r} has dtype {_name(got.dtype, dtype_name)}, expected "
                f"{_name(want.dtype, dtype_name)}",
            )
        if got.device.type == "meta":
            return CheckResult(
                EvaluationStatus.RUNTIME_ERROR,
                None,
                f"output {name!r} is a meta-device tensor (a shape without data); return "
                f"it on the inputs' device ({device or want.device.type})",
            )
    return None


def _name(dtype: Any, namer: Callable[[Any], str]) -> str:
    try:
        return namer(dtype)
    except ValueError:
        return str(dtype)


def elementwise_check(
    definition: Definition, outputs: Sequence, reference: Sequence, tol: Tolerance
) -> CheckResult:
    """The default rule over every output; the worst errors across outputs go in correctness."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    # Imported here: fib_core.data.trace loads pydantic (~50 ms); this module's import does not.
    from fib_core.data.trace import Correctness, EvaluationStatus

    comparisons = []
    for name, got, want in zip(definition.output_names, outputs, reference, strict=True):
        if isinstance(want, torch.Tensor):
            comparisons.append(compare_tensor(name, got, want, tol))
        else:
            comparisons.append(compare_scalar(name, got, want, tol))
    failing = [
        c for c in comparisons
        if c.matched_ratio < tol.required_matched_ratio or c.nan_solution or c.nan_reference
        or c.inf_mismatch
    ]
    correctness = Correctness(
        max_relative_error=max((c.max_rel for c in comparisons), default=0.0),
        max_absolute_error=max((c.max_abs for c in comparisons), default=0.0),
        extra={
            "checker": "elementwise",
            "tolerance": tol.to_dict(),
            "outputs": {c.name: c.to_dict() for c in comparisons},
        },
    )
    if failing:
        message = " | ".join(c.describe(tol) for c in failing)
        return CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, correctness, message)
    notes = [f"{c.name}: {c.inf_matched} matching inf" for c in comparisons if c.inf_matched]
    return CheckResult(EvaluationStatus.PASSED, correctness, "; ".join(notes))


def check_outputs(
    definition: Definition,
    outputs: Sequence,
    reference: Sequence,
    *,
    tolerance: Tolerance,
    inputs: Sequence | None = None,
) -> CheckResult:
    """Structure first (count, shape, dtype), then the definition's checker or the default rule."""
    failed = check_structure(definition, outputs, reference)
    if failed is not None:
        return failed
    name, checker = checker_for(definition)
    if checker is None:
        return elementwise_check(definition, outputs, reference, tolerance)
    named_inputs = dict(zip(definition.input_names, inputs or (), strict=False))
    result = checker(
        definition,
        dict(zip(definition.output_names, outputs, strict=True)),
        dict(zip(definition.output_names, reference, strict=True)),
        named_inputs,
        tolerance,
    )
    if result.correctness is not None:
        extra = dict(result.correctness.extra or {})
        extra.setdefault("checker", name)
        extra.setdefault("tolerance", tolerance.to_dict())
        result.correctness.extra = extra
    return result


# --- poisoning and in-place mutation ---------------------------------------------------------


def poison_value(dtype: torch.dtype) -> float | int | None:
    """What an unwritten element of this dtype is filled with: NaN, or the most negative int."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    if dtype == torch.bool or "float4" in str(dtype):
        return None  # no value is invalid for these
    if dtype.is_floating_point:
        return float("nan")
    return int(torch.iinfo(dtype).min)


def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill a preallocated output so that any element the solution does not write fails."""
    value = poison_value(tensor.dtype)
    if value is not None:
        tensor.fill_(value)
    return tensor


def same_bits(a: Any, b: Any) -> bool:
    """Bitwise equality (NaN-safe) for tensors; plain equality for everything else."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(torch.equal(_bytes(a), _bytes(b)))
    return a is b or a == b


def _bytes(t: torch.Tensor) -> torch.Tensor:
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def mutated_inputs(names: Sequence[str], before: Sequence, after: Sequence) -> list[str]:
    """Names of the inputs whose contents differ between the pristine copy and the call's."""
    return [n for n, a, b in zip(names, before, after, strict=True) if not same_bits(a, b)]
