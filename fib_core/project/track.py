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

from fib_core.dataset.tracks import track_of_definition
from fib_core.errors import ConfigError
from fib_core.project.config import KitConfig, closest, config_from_dict, load_config
from fib_core.project.template import config_values, render_config, toml_value, written_build


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
    lines = [
        "",
        "[track]",
        "# every definition this fork holds; sources in solution/<definition>/<language>/.",
        "# [solution] and [build] above are the default definition (what run_local.py runs",
        "# without --definition); each other one has its own [track.<definition>] table.",
        f"definitions = {toml_value(list(definitions))}",
    ]
    for name in definitions:
        if name not in tables:
            continue
        lines += ["", f"[track.{name}]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in tables[name].items() if v is not None]
    return "\n".join(lines) + "\n"


def single_definition_text(cfg: KitConfig) -> str:
    """``config.toml`` naming only ``cfg``'s definition, in the organizers' format.

    This is what a submission tag's commit holds: ``[solution]`` + ``[build]`` (+ the
    ``[benchmark]`` defaults), no ``[track]`` table.
    """
    values = config_values(cfg)
    values["build"] = written_build(values["build"])
    return render_config(values)
