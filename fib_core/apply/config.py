"""ApplyConfig: which recorded solutions ``apply`` may route to, and what a miss does."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fib_core.errors import ConfigError

ON_MISS_POLICIES = ("fallback_only", "use_def_best")


class ApplyConfigError(ConfigError, ValueError):
    """A bad ApplyConfig field (also a ValueError, as code written for the organizers expects)."""


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ApplyConfigError(f"ApplyConfig.{name}: found {value!r}, expected a number")
    return float(value)


@dataclass(frozen=True)
class ApplyConfig:
    """Settings of the apply runtime; every field has a default.

    - ``max_atol`` / ``max_rtol``: a PASSED trace counts only if its recorded worst absolute and
      relative errors are within these (a solution that passed with a looser tolerance is not
      trusted inside a model).
    - ``aot_ratio``: the share (0..1) of each definition's routed solutions built when the
      runtime starts; the rest are built on their first call.
    - ``on_miss_policy``: ``"fallback_only"`` runs the original function for a shape with no
      recorded winner; ``"use_def_best"`` runs the definition's overall best solution.

    >>> ApplyConfig(max_atol=1e-3, aot_ratio=0.5)
    ApplyConfig(max_atol=0.001, max_rtol=1e-05, aot_ratio=0.5, on_miss_policy='fallback_only')
    """

    max_atol: float = 1e-2
    max_rtol: float = 1e-5
    aot_ratio: float = 1.0
    on_miss_policy: str = "fallback_only"

    def __post_init__(self) -> None:
        for name in ("max_atol", "max_rtol"):
            value = _number(name, getattr(self, name))
            if value < 0:
                raise ApplyConfigError(f"ApplyConfig.{name}: found {value!r}, expected >= 0")
            object.__setattr__(self, name, value)
        ratio = _number("aot_ratio", self.aot_ratio)
        if not 0.0 <= ratio <= 1.0:
            raise ApplyConfigError(
                f"ApplyConfig.aot_ratio: found {ratio!r}, expected a fraction in [0, 1]"
            )
        object.__setattr__(self, "aot_ratio", ratio)
        if self.on_miss_policy not in ON_MISS_POLICIES:
            raise ApplyConfigError(
                f"ApplyConfig.on_miss_policy: found {self.on_miss_policy!r}, expected one of "
                + ", ".join(repr(p) for p in ON_MISS_POLICIES)
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_atol": self.max_atol,
            "max_rtol": self.max_rtol,
            "aot_ratio": self.aot_ratio,
            "on_miss_policy": self.on_miss_policy,
        }
