"""A whole track in one fork: every definition side by side, one ``config.toml``.

The organizers read one definition per git tag, from the tag's ``config.toml`` (``[solution]``
and ``[build]``), and a two-definition track (sparse_attention, gated_delta_net) needs a tag for
each. So the fork keeps the organizers' format for one definition (the *default*: what a plain
``run_local.py`` runs) and lists the track in a ``[track]`` table; every other definition has
its own ``[track.<definition>]`` table with its ``[solution]`` keys (``name``, ``description``)
and its ``[build]`` keys. Each definition's settings live in exactly one place::

    [solution]                      # the default definition, organizers' format
    definition = "gdn_decode_qk4_v8_d128_k_last"
    ...
    [build]
    language = "triton"
    entry_point = "kernel.py::run"

    [track]
    definitions = ["gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"]

    [track.gdn_prefill_qk4_v8_d128_k_last]
    name = "your-team-gdn_prefill_qk4_v8_d128_k_last-triton"
    language = "triton"
    entry_point = "kernel.py::run"

Sources: ``solution/<definition>/<language>/``. A fork without ``[track]`` is a single-kernel
fork, sources in ``solution/<language>/``, exactly as before.

Example::

    from fib_core.project.track import definition_config, track_definitions
    for name in track_definitions("config.toml"):
        cfg = definition_config("config.toml", name)
        print(name, cfg.source_dir)
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from fib_core.dataset.tracks import TRACKS
from fib_core.errors import ConfigError
from fib_core.project.config import SCHEMA, KitConfig, closest, config_from_dict, load_config

# Keys a [track.<definition>] table may hold: its own [solution] keys and every [build] key.
OWN_SOLUTION_KEYS = ("name", "description")
TABLE_KEYS = (*OWN_SOLUTION_KEYS, *SCHEMA["build"])


def track_of_definition(definition: str) -> str | None:
    """The track that holds ``definition`` (``gated_delta_net`` for GDN decode), or None."""
    return next((t for t, defs in TRACKS.items() if definition in defs), None)


def parse_track(path: Path, data: dict[str, Any]) -> tuple[str, ...]:
    """The ``[track]`` definitions of parsed ``config.toml`` data, validated; () without one.

    Checks: a list of distinct definition names of one track, the default definition
    (``[solution] definition``) among them, a ``[track.<definition>]`` table for every other
    one and none for the default, only known keys in each table.
    """
    table = data.get("track")
    if table is None:
        return ()
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [track] must be a table (definitions = [...])")
    defs = table.get("definitions")
    if not isinstance(defs, list) or not defs or not all(isinstance(d, str) for d in defs):
        raise ConfigError(
            f"{path}: [track] definitions must be a non-empty list of definition names"
        )
    if len(set(defs)) != len(defs):
        raise ConfigError(f"{path}: [track] definitions lists a definition twice")
    default = (data.get("solution") or {}).get("definition")
    if default not in defs:
        guess = closest(default, defs) if isinstance(default, str) else None
        hint = f"; did you mean '{guess}'?" if guess else ""
        raise ConfigError(
            f"{path}: [track] definitions must include [solution] definition = {default!r} "
            f"(the default definition){hint}"
        )
    unknown = [d for d in defs if track_of_definition(d) is None]
    if unknown:
        every = [d for names in TRACKS.values() for d in names]
        guess = closest(unknown[0], every)
        hint = f"did you mean '{guess}'?" if guess else f"known: {', '.join(every)}"
        raise ConfigError(
            f"{path}: [track] definitions lists '{unknown[0]}', which is no contest definition; "
            f"{hint}"
        )
    tracks = {track_of_definition(d) for d in defs}
    if len(tracks) != 1:
        known = "; ".join(t + ": " + ", ".join(v) for t, v in TRACKS.items())
        raise ConfigError(
            f"{path}: [track] definitions {defs} are not the definitions of one track ({known})"
        )
    for key, value in table.items():
        if key == "definitions":
            continue
        if key not in defs or not isinstance(value, dict):
            guess = closest(key, defs) if isinstance(value, dict) else None
            hint = f" (did you mean [track.{guess}]?)" if guess else ""
            raise ConfigError(
                f"{path}: [track] unknown key '{key}'{hint}; expected definitions = [...] and "
                "one [track.<definition>] table per listed definition"
            )
        if key == default:
            raise ConfigError(
                f"{path}: [track.{key}] repeats the default definition, whose settings are "
                "[solution] and [build]; delete that table"
            )
        for k in value:
            if k not in TABLE_KEYS:
                guess = closest(k, TABLE_KEYS)
                hint = f"; did you mean '{guess}'?" if guess else ""
                raise ConfigError(f"{path}: [track.{key}] unknown key '{k}'{hint}")
    for d in defs:
        if d != default and d not in table:
            raise ConfigError(
                f"{path}: [track] lists {d} but there is no [track.{d}] table "
                "(python scripts/switch_track.py DEFINITION --add writes one)"
            )
    return tuple(defs)


def read_toml(path: Path) -> dict[str, Any]:
    """Parsed TOML of ``path`` (load_config has already reported a missing or broken file)."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: cannot read: {err}") from None


def track_definitions(config_path: str | Path = "config.toml") -> tuple[str, ...]:
    """Every definition the fork holds: the ``[track]`` list, or the one ``[solution]`` names."""
    cfg = load_config(config_path)
    return cfg.track or (cfg.solution.definition,)


def definition_config(config_path: str | Path, definition: str | None = None) -> KitConfig:
    """The config of one definition of the fork, in the single-definition form.

    ``definition`` None or the default one: ``config.toml`` as it stands. Another definition
    of the track: its ``[track.<definition>]`` table, with ``author`` and ``[benchmark]`` from
    the top level.
    """
    path = Path(config_path)
    cfg = load_config(path)
    if definition is None or definition == cfg.solution.definition:
        return cfg
    if definition not in cfg.track:
        held = ", ".join(cfg.track or (cfg.solution.definition,))
        known = track_of_definition(definition) is not None
        guess = None if known else closest(definition, cfg.track or (cfg.solution.definition,))
        hint = f"did you mean '{guess}'? " if guess else ""
        add = (
            ""
            if track_of_definition(definition) != track_of_definition(cfg.solution.definition)
            else f"; add it with python scripts/switch_track.py {definition} --add"
        )
        raise ConfigError(
            f"{path}: this fork does not hold definition '{definition}'; {hint}"
            f"it holds: {held}{add}"
        )
    data = read_toml(path)
    table = dict(data["track"][definition])
    values = {
        "solution": {
            "name": table.pop("name", f"{cfg.solution.author}-{definition}"),
            "definition": definition,
            "author": cfg.solution.author,
            "description": table.pop("description", ""),
        },
        "build": table,
        "benchmark": data.get("benchmark", {}),
    }
    return config_from_dict(values, path, table=f"track.{definition}", track=cfg.track)


def track_configs(config_path: str | Path = "config.toml") -> list[KitConfig]:
    """The config of every definition the fork holds, default first."""
    return [definition_config(config_path, d) for d in track_definitions(config_path)]


def render_track(definitions: list[str], tables: dict[str, dict[str, Any]]) -> str:
    """The ``[track]`` text appended to a rendered ``config.toml``.

    >>> print(render_track(["a"], {}).splitlines()[1])
    [track]
    """
    from fib_core.project.template import _value

    lines = [
        "",
        "[track]",
        "# every definition this fork holds; sources in solution/<definition>/<language>/.",
        "# [solution] and [build] above are the default definition (what run_local.py runs",
        "# without --definition); each other one has its own [track.<definition>] table.",
        f"definitions = {_value(list(definitions))}",
    ]
    for name in definitions:
        if name not in tables:
            continue
        lines += ["", f"[track.{name}]"]
        lines += [f"{k} = {_value(v)}" for k, v in tables[name].items() if v is not None]
    return "\n".join(lines) + "\n"


def single_definition_text(cfg: KitConfig) -> str:
    """``config.toml`` naming only ``cfg``'s definition, in the organizers' format.

    This is what a submission tag's commit holds: ``[solution]`` + ``[build]`` (+ the
    ``[benchmark]`` defaults), no ``[track]`` table.
    """
    from fib_core.project.template import config_values, render_config, written_build

    values = config_values(cfg)
    values["build"] = written_build(values["build"])
    return render_config(values)
