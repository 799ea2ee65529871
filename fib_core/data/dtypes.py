"""The dtype names of the FlashInfer-Trace format and their torch counterparts.

Kept free of a module-level torch import: reading a dataset (scripts, reports, CI checks) must
not pay torch's import time. Only :func:`torch_dtype` and :func:`dtype_name` import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# The order is the format's own listing; membership is what validation checks.
DTYPE_NAMES: tuple[str, ...] = (
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "int64",
    "int32",
    "int16",
    "int8",
    "bool",
)

_DTYPE_SET = frozenset(DTYPE_NAMES)

# torch spells fp4 differently (a packed pair per byte); every other name is torch's attribute.
_TORCH_ATTR = {name: name for name in DTYPE_NAMES}
_TORCH_ATTR["float4_e2m1"] = "float4_e2m1fn_x2"


def is_dtype_name(name: object) -> bool:
    """True when ``name`` is one of :data:`DTYPE_NAMES` (used by schema validation)."""
    return isinstance(name, str) and name in _DTYPE_SET


def torch_dtype(name: str) -> torch.dtype:
    """Map a format dtype name to ``torch.dtype``.

    Raises ``ValueError`` for names outside the format, and when the installed torch lacks the
    type (fp4 needs a recent torch), so callers can report which input cannot be created.
    """
    if name not in _DTYPE_SET:
        raise ValueError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPE_NAMES)}")
    import torch

    dtype = getattr(torch, _TORCH_ATTR[name], None)
    if dtype is None:
        raise ValueError(f"dtype {name!r} is not available in torch {torch.__version__}")
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    """Map a ``torch.dtype`` back to its format name; ``ValueError`` if the format lacks it."""
    import torch

    for name, attr in _TORCH_ATTR.items():
        if getattr(torch, attr, None) == dtype:
            return name
    raise ValueError(f"torch dtype {dtype} has no FlashInfer-Trace name")
