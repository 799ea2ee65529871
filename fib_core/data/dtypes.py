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


# Bytes per stored element, by torch's name of each type (fp4 packs two values a byte: the
# tensors hold one byte per stored element). Tensors crossing the engine's process boundary
# may have exactly these types.
TORCH_ELEMENT_BYTES: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float4_e2m1fn_x2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}


def element_bytes(name: str, default: int = 8) -> int:
    """Bytes per element of a dtype given by its format name or torch's, without torch.

    >>> element_bytes("bfloat16"), element_bytes("float4_e2m1"), element_bytes("unknown")
    (2, 1, 8)
    """
    return TORCH_ELEMENT_BYTES.get(_TORCH_ATTR.get(name, name), default)


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
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    dtype = getattr(torch, _TORCH_ATTR[name], None)
    if dtype is None:
        raise ValueError(f"dtype {name!r} is not available in torch {torch.__version__}")
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    """Map a ``torch.dtype`` back to its format name; ``ValueError`` if the format lacks it."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    for name, attr in _TORCH_ATTR.items():
        if getattr(torch, attr, None) == dtype:
            return name
    raise ValueError(f"torch dtype {dtype} has no FlashInfer-Trace name")
