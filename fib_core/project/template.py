"""Write ``config.toml`` as a documented file.

tomli-w formats every value (so quoting and escaping are right), while the comments come
from :data:`fib_core.project.config.SCHEMA`: a rewritten config stays as readable as the one
the fork shipped with.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from fib_core.project.config import SCHEMA, KitConfig

# How a track fork's config.toml comments name a definition's sources.
TRACK_SOURCES = "solution/<definition>/<language>/"

HEADER = """\
# config.toml: what this fork builds and how it is benchmarked.
# Every key is documented in the README ("config.toml"). Switch definition or language with
#   python scripts/switch_track.py DEFINITION [--language triton|cuda]
"""


def toml_value(v: Any) -> str:
    """One TOML value on one line (tomli_w formats; arrays are kept inline)."""
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    try:
        # Imported here: tomli_w is optional (absent on a bare GPU image).
        import tomli_w
    except ImportError:  # a bare GPU image: the scalar forms config.toml uses, written here
        return _plain_value(v)
    # tomli_w only dumps tables; dump a one-key table and keep the right-hand side.
    return tomli_w.dumps({"v": v}).split("=", 1)[1].strip()


def _plain_value(v: Any) -> str:
    """A TOML scalar without tomli-w: JSON's string escapes are valid TOML basic strings.

    >>> _plain_value(True), _plain_value(1e-05), _plain_value("kernel.py::run")
    ('true', '1e-05', '"kernel.py::run"')
    """
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, int | float | str):
        return json.dumps(v)
    raise TypeError(f"cannot write {type(v).__name__} {v!r} into config.toml")


def render_config(values: dict[str, dict[str, Any]], *, track: bool = False) -> str:
    """A documented ``config.toml`` holding ``values`` (section -> key -> value).

    Keys left out are written as commented-out lines showing their default, so every option
    stays discoverable in the file itself. ``track``: the file will hold a ``[track]`` table,
    so the comments name the definition's own source folder (``solution/<definition>/...``).

    >>> text = render_config({"solution": {"name": "x", "definition": "d", "author": "me"},
    ...                       "build": {"language": "triton", "entry_point": "kernel.py::run"}})
    >>> 'entry_point = "kernel.py::run"' in text
    True
    """
    lines = [HEADER]
    for section, keys in SCHEMA.items():
        given = values.get(section, {})
        lines.append(f"[{section}]")
        for key, spec in keys.items():
            doc = spec.doc.replace("solution/<language>/", TRACK_SOURCES) if track else spec.doc
            lines.append(f"# {doc}")
            if key in given and given[key] is not None:
                lines.append(f"{key} = {toml_value(given[key])}")
            elif spec.example is not None:
                lines.append(f"# {key} = {toml_value(spec.example)}")
        lines.append("")
    return "\n".join(lines)


def written_build(build: dict[str, Any]) -> dict[str, Any]:
    """The ``[build]`` keys worth writing: those set, without empty lists, and ``binding`` only
    for CUDA (a Triton config holding ``binding = "tvm-ffi"`` reads as if it mattered).

    >>> written_build({"language": "triton", "binding": "tvm-ffi", "dependencies": []})
    {'language': 'triton'}
    """
    out = {k: v for k, v in build.items() if v not in ([], None)}
    if out.get("language") != "cuda":
        out.pop("binding", None)
    return out


def config_values(cfg: KitConfig) -> dict[str, dict[str, Any]]:
    """The values of a loaded config, in the shape :func:`render_config` takes."""
    return {
        "solution": asdict(cfg.solution),
        "build": asdict(cfg.build),
        "benchmark": {k: v for k, v in asdict(cfg.benchmark).items() if v is not None},
    }
