"""Which tolerances a definition is judged under, and who said so.

Precedence, lowest to highest: the kit's defaults (the organizers' numbers) -> the op_type's
packaged default -> the contest's grading of the definition (its ``eval.toml``) -> the
definition's own ``"tolerance"`` object (kept in ``Definition.extra``) -> explicit config or
command-line values. The :class:`~fib_core.checking.Tolerance` made here records which layer
set each value.

Example::

    tol = resolve_tolerance(definition, BenchmarkConfig(atol=0.05))
    tol.atol, tol.sources["atol"]   # (0.05, 'config')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fib_core.bench.grading import OP_TYPE_TOLERANCE, ORGANIZER_TOLERANCE, contest_tolerance
from fib_core.checking import TOLERANCE_KEYS, Tolerance, ToleranceError

if TYPE_CHECKING:
    from fib_core.bench.config import BenchmarkConfig
    from fib_core.data.definition import Definition

DEFAULT_TOLERANCE = dict(ORGANIZER_TOLERANCE)
# The organizers' numbers have one home, fib_core.bench.grading: their defaults
# (ORGANIZER_TOLERANCE), their packaged per-op_type defaults (OP_TYPE_TOLERANCE: fp8 MoE 0.95)
# and, per definition, the flags the contest passes (its eval.toml [contest]: the MoE's 0.9),
# applied by name, above op_type, below the definition's own "tolerance" key and explicit
# settings.


def resolve_tolerance(definition: Definition, config: BenchmarkConfig | None = None) -> Tolerance:
    """defaults -> op_type -> contest grading -> definition -> explicit config: the last layer
    that sets a value wins."""
    values: dict[str, float] = dict(DEFAULT_TOLERANCE)
    sources = {key: "default" for key in TOLERANCE_KEYS}
    layers: list[tuple[str, dict[str, Any]]] = [
        ("op_type", OP_TYPE_TOLERANCE.get(definition.op_type, {})),
        ("contest", contest_tolerance(definition.name)),
        ("definition", _definition_tolerance(definition)),
    ]
    if config is not None:
        layers.append(("config", {k: getattr(config, k) for k in TOLERANCE_KEYS}))
    for source, layer in layers:
        for key in TOLERANCE_KEYS:
            if layer.get(key) is not None:
                values[key] = float(layer[key])
                sources[key] = source
    return Tolerance(**values, sources=sources)


def _definition_tolerance(definition: Definition) -> dict[str, Any]:
    raw = definition.extra.get("tolerance")
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - set(TOLERANCE_KEYS):
        raise ToleranceError(
            f"definition {definition.name!r}: 'tolerance' = {raw!r}; expected an object with "
            f"some of {', '.join(TOLERANCE_KEYS)}"
        )
    return raw
