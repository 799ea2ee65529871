"""Field types the FlashInfer-Trace models share, with the format's rules built in.

Scalars are strict (``true`` is not the integer 1, ``"3"`` is not a number): a file that
spells a value wrongly is reported, not guessed at. The rules that need Python (file names,
relative paths, non-finite numbers) are plain functions over one value, so a record costs a
few cheap calls at most.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, Strict

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


def _json_float(value: Any) -> Any:
    """The format's strings for non-finite numbers as floats; anything else is left to the
    strict float check (which refuses other strings, booleans and null)."""
    if value.__class__ is str:
        try:
            return _NONFINITE[value]
        except KeyError:
            raise rule_error('a number (or "Infinity", "-Infinity", "NaN")') from None
    return value


def _non_negative_json_float(value: Any) -> Any:
    """As :func:`_json_float`, and below zero is refused (NaN compares false: allowed, as in
    the format, where NaN marks an error that could not be measured)."""
    if value.__class__ is str:
        value = _json_float(value)
    if value.__class__ in (int, float) and value < 0:
        raise rule_error("a number >= 0 (or NaN)")
    return value


JsonFloat = Annotated[float, Strict(), BeforeValidator(_json_float)]
NonNegativeJsonFloat = Annotated[float, Strict(), BeforeValidator(_non_negative_json_float)]
