"""The words of a correctness check, shared by the judge and by definition folders.

A verdict (:class:`CheckResult`), the tolerances it was judged under (:class:`Tolerance`) and
the organizers' element rule (:func:`element_failures`: an element fails only if it exceeds
*both* atol and rtol, and NaN or an unmatched inf always fails). They live below
``fib_core.dataset`` so that a definition folder's ``checker.py`` can judge its own outputs
with them without importing the engine; ``fib_core.bench.evaluation`` builds the kit's checks
(structure, the element-wise report, where tolerances come from) on top of them.

Example (a definition folder's checker)::

    from fib_core.checking import CheckResult, Tolerance, element_failures

    def check(definition, outputs, reference, inputs, tolerance: Tolerance) -> CheckResult:
        failed, _, _ = element_failures(outputs["out"].float(), reference["out"].float(),
                                        tolerance)
        ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from fib_core.errors import FibError

if TYPE_CHECKING:
    import torch

    from fib_core.data.trace import Correctness, EvaluationStatus

TOLERANCE_KEYS = ("atol", "rtol", "required_matched_ratio")
# Guard of the organizers' relative error: |x - y| / (|y| + REL_EPS).
REL_EPS = 1e-8


@dataclass
class CheckResult:
    """Verdict of one comparison; ``correctness`` is set for PASSED and INCORRECT_NUMERICAL."""

    status: EvaluationStatus
    correctness: Correctness | None
    message: str

    def __post_init__(self) -> None:
        # Imported here for start-up time: the strict view of a saved run loads this module
        # without the trace schema (pydantic, about 170 ms).
        from fib_core.data.trace import EvaluationStatus

        self.status = EvaluationStatus(self.status)  # a plugin's plain string becomes the member

    @property
    def passed(self) -> bool:
        return self.status is self.status.PASSED


class ToleranceError(FibError):
    """A definition's or config's tolerance value is not usable."""


@dataclass(frozen=True)
class Tolerance:
    """Per-element tolerances and the fraction of elements that must match.

    >>> Tolerance(atol=0.01, rtol=0.01, required_matched_ratio=1.0).to_dict()["atol"]
    0.01
    """

    atol: float
    rtol: float
    required_matched_ratio: float
    # Where each value came from ("default", "op_type", "definition", "config"): for the trace.
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for key in TOLERANCE_KEYS:
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ToleranceError(f"tolerance {key} = {value!r}; expected a number >= 0")
        if self.required_matched_ratio > 1:
            raise ToleranceError(
                f"tolerance required_matched_ratio = {self.required_matched_ratio!r}; "
                "expected a number in [0, 1]"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "atol": self.atol,
            "rtol": self.rtol,
            "required_matched_ratio": self.required_matched_ratio,
            "sources": dict(self.sources),
        }


class NonFiniteMasks(NamedTuple):
    """Where either side of a comparison is NaN or inf, computed once per compared pair."""

    nan_x: torch.Tensor
    nan_y: torch.Tensor
    inf_x: torch.Tensor
    inf_y: torch.Tensor
    same_inf: torch.Tensor  # an inf matched by the same inf
    finite: torch.Tensor  # both sides finite
    bad: torch.Tensor  # fails whatever the tolerance: a NaN, or an unmatched inf


def non_finite_masks(x: torch.Tensor, y: torch.Tensor) -> NonFiniteMasks:
    """The NaN and inf masks of ``x`` (the solution's side) against ``y`` (the reference's)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    nan_x, nan_y = torch.isnan(x), torch.isnan(y)
    inf_x, inf_y = torch.isinf(x), torch.isinf(y)
    same_inf = inf_x & inf_y & (x == y)
    finite = torch.isfinite(x) & torch.isfinite(y)
    bad = nan_x | nan_y | ((inf_x | inf_y) & ~same_inf)
    return NonFiniteMasks(nan_x, nan_y, inf_x, inf_y, same_inf, finite, bad)


def element_failures(
    x: torch.Tensor, y: torch.Tensor, tol: Tolerance, masks: NonFiniteMasks | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(failed mask, |x - y| where both finite else 0, relative error) of float32 tensors
    under the organizers' rule, NaN/inf aware: an element fails beyond both atol and rtol, or
    when either side is NaN, or an inf is not matched by the same inf. ``masks`` (this pair's
    :func:`non_finite_masks`) saves computing them again."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    sp = masks if masks is not None else non_finite_masks(x, y)
    diff = torch.where(sp.finite, (x - y).abs(), torch.zeros_like(x))
    rel = diff / (y.abs() + REL_EPS)
    failed_mask = (diff > tol.atol) & (rel > tol.rtol)
    failed_mask |= sp.bad
    return failed_mask, diff, rel
