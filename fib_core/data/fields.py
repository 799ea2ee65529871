"""Field types the FlashInfer-Trace models share, with the format's rules built in.

Scalars are strict (``true`` is not the integer 1, ``"3"`` is not a number): a file that
spells a value wrongly is reported, not guessed at. The rules that need Python (file names,
relative paths, non-finite numbers) are plain functions over one value, so a record costs a
few cheap calls at most.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, Strict, WithJsonSchema

from .validation import rule_error

Str = Annotated[str, Strict()]
NonEmptyStr = Annotated[str, Strict(), Field(min_length=1)]
Bool = Annotated[bool, Strict()]
NonNegativeInt = Annotated[int, Strict(), Field(ge=0)]

# Longest name a file name can be built from (255 bytes, less room for a suffix such as
# ".safetensors" or a uuid).
MAX_NAME_BYTES = 200
# The longest file name common file systems take.
MAX_PATH_PART_BYTES = 255


def _file_name(value: str) -> str:
    """Definition names and op_types become folders of the dataset and the caches; a name that
    climbs out (``../x``, ``/tmp/x``) would make the kit write outside them."""
    bad = (
        "/" in value
        or "\\" in value
        or "\0" in value
        or ".." in value
        or value.startswith(".")
        or len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
    )
    if bad:
        raise rule_error(
            f"a name usable as a file name (no '/', '\\', '..', NUL, leading '.'; at most "
            f"{MAX_NAME_BYTES} bytes)",
            hint="rename it, e.g. letters, digits and '_' only",
        )
    return value


FileName = Annotated[str, Strict(), Field(min_length=1), AfterValidator(_file_name)]


def relative_path(path: str) -> str:
    """A safe relative POSIX path: no absolute paths, no ``..``, no empty parts, no backslashes.

    Sources are written under a build folder; a path that escapes it would overwrite other
    files.
    """
    bad = (
        path.startswith("/")
        or "\\" in path
        or "\0" in path
        or (len(path) > 1 and path[1] == ":")
        or any(part in ("", "..") for part in path.split("/"))
    )
    if bad:
        raise rule_error(
            "a relative path inside the solution (no leading '/', no '..', no empty parts, "
            "no NUL byte)",
            found=path,
        )
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > MAX_PATH_PART_BYTES:
            raise rule_error(
                f"file and folder names of at most {MAX_PATH_PART_BYTES} bytes",
                found=path,
                hint=f"shorten {part[:20]}...",
            )
    return path


RelativePath = Annotated[str, Strict(), AfterValidator(relative_path)]


# Non-finite floats: the organizers' models write them as these strings (plain JSON has no
# token for them); the loaders reject the bare literals Python's json module would accept.
_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _unusual_measure(value: Any) -> float:
    """What the fast check (a number >= 0, in pydantic-core) refused: the format's
    strings for non-finite numbers become floats, NaN passes (an error that could not be
    measured), anything else is reported."""
    if value.__class__ is str:
        number = _NONFINITE.get(value)
        if number is None:
            raise rule_error('a number (or "Infinity", "-Infinity", "NaN")')
        value = number
    elif value.__class__ not in (int, float):
        raise rule_error("a number")
    if value < 0:  # NaN compares false: allowed
        raise rule_error("a number >= 0 (or NaN)")
    return float(value)


# A latency or an error bound: a number >= 0, +Infinity or NaN (written "Infinity", "NaN").
# The common case is checked without Python; only the rest reaches _unusual_measure.
Measure = Annotated[
    Annotated[float, Strict(), Field(ge=0)] | Annotated[Any, BeforeValidator(_unusual_measure)],
    Field(union_mode="left_to_right"),
    WithJsonSchema({"anyOf": [{"type": "number", "minimum": 0}, {"enum": ["Infinity", "NaN"]}]}),
]
