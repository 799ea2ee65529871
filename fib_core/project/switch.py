"""Switch a fork to another definition or language.

Installs ``starters/<definition>/<language>/`` into ``solution/<language>/`` and rewrites
``config.toml`` to match the starter's ``starter.toml``. Existing work is never overwritten
silently: if ``solution/<language>/`` holds files that differ from the starter, the switch is
refused unless ``force`` is given (and then the old folder is kept as a backup beside it).

Example::

    from pathlib import Path
    from fib_core.project.switch import switch_track
    switch_track(Path("."), "gdn_prefill_qk4_v8_d128_k_last", language="triton")
"""

from __future__ import annotations

import filecmp
import shutil
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from fib_core.atomic import atomic_write_text
from fib_core.dataset.tracks import TRACKS, track_of, track_of_definition
from fib_core.errors import ConfigError
from fib_core.project.config import SCHEMA, closest, load_config
from fib_core.project.template import config_values, render_config, written_build
from fib_core.project.track import read_toml, render_track

STARTER_FILE = "starter.toml"


@dataclass(frozen=True)
class SwitchResult:
    definition: str
    language: str
    installed: Path
    backup: Path | None


def available_starters(root: Path) -> dict[str, list[str]]:
    """definition -> languages that have a starter under ``root/starters``."""
    out: dict[str, list[str]] = {}
    base = root / "starters"
    if base.is_dir():
        for d in sorted(p for p in base.iterdir() if p.is_dir()):
            langs = sorted(p.name for p in d.iterdir() if (p / STARTER_FILE).is_file())
            if langs:
                out[d.name] = langs
    return out


def read_starter(starter_dir: Path) -> dict:
    """The ``[build]`` and ``[solution]`` tables of a starter's ``starter.toml``."""
    path = starter_dir / STARTER_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: cannot read the starter's settings: {err}") from None
    build = data.get("build", {})
    unknown = set(build) - set(SCHEMA["build"])
    if unknown or "entry_point" not in build or "language" not in build:
        raise ConfigError(f"{path}: [build] needs language and entry_point (and only build keys)")
    return data


def _resolve_definition(root: Path, name: str, starters: dict[str, list[str]]) -> str:
    track = track_of(name)
    if track is not None:
        raise ConfigError(
            f"'{name}' is a track; pass one of its definitions: {', '.join(TRACKS[track])}"
        )
    if name in starters:
        return name
    guess = closest(name, starters)
    hint = f"did you mean '{guess}'? " if guess else ""
    raise ConfigError(
        f"no starter for definition '{name}' under {root / 'starters'}; {hint}"
        f"available: {', '.join(starters) or 'none'}"
    )


def _same_as(current: Path, starter: Path) -> bool:
    """True when ``current`` is an unmodified copy of ``starter`` (caches aside)."""
    for path in current.rglob("*"):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        twin = starter / path.relative_to(current)
        if not twin.is_file() or not filecmp.cmp(path, twin, shallow=False):
            return False
    return True


def holds_work(current: Path, root: Path, language: str) -> bool:
    """True when ``current`` has files that are not an unmodified copy of some starter."""
    if not current.exists() or not any(p.is_file() for p in current.rglob("*")):
        return False
    starters = available_starters(root)
    return not any(
        _same_as(current, root / "starters" / d / language)
        for d, langs in starters.items()
        if language in langs
    )


def switch_track(
    root: Path, definition: str, language: str | None = None, *, force: bool = False
) -> SwitchResult:
    """Install the starter for ``definition``/``language`` and rewrite ``config.toml``."""
    root = Path(root)
    _refuse_track_fork(root / "config.toml")
    starters = available_starters(root)
    definition = _resolve_definition(root, definition, starters)
    languages = starters[definition]
    if language is None:
        language = "triton" if "triton" in languages else languages[0]
    if language not in languages:
        raise ConfigError(
            f"definition '{definition}' has no {language} starter; available: {', '.join(languages)}"
        )
    starter_dir = root / "starters" / definition / language
    settings = read_starter(starter_dir)
    target = root / "solution" / language
    backup = None
    if holds_work(target, root, language):
        if not force:
            raise ConfigError(
                f"{target} holds your own work; refusing to overwrite it. Move the folder "
                f"elsewhere, or pass --force (it is then kept as {target.name}.backup-<time>)"
            )
        backup = target.with_name(f"{language}.backup-{time.strftime('%Y%m%d-%H%M%S')}")
        target.rename(backup)
    elif target.exists():
        shutil.rmtree(target)
    shutil.copytree(starter_dir, target, ignore=shutil.ignore_patterns(STARTER_FILE, "__pycache__"))
    _rewrite_config(root / "config.toml", definition, settings)
    return SwitchResult(definition, language, target, backup)


def _refuse_track_fork(path: Path) -> None:
    """A track fork's config.toml holds every definition: a plain switch would drop them."""
    try:
        cfg = load_config(path)
    except ConfigError:
        return  # a broken or missing config is replaced whole, as before
    if cfg.track:
        raise ConfigError(
            f"{path}: this fork holds the track {', '.join(cfg.track)}; a switch would drop "
            "it. Add a definition with --add, or edit [build] / [track.<definition>] there"
        )


def _rewrite_config(path: Path, definition: str, settings: dict) -> None:
    author = "your-team"
    keep_bench: dict = {}
    if path.is_file():
        try:
            old = config_values(load_config(path))
            author = old["solution"]["author"]
            keep_bench = old["benchmark"]
        except ConfigError:
            pass  # a broken config is replaced whole; the new one is valid
    build = dict(settings["build"])
    values = {
        "solution": {
            "name": f"{author}-{definition}-{build['language']}",
            "definition": definition,
            "author": author,
            "description": settings.get("solution", {}).get("description", ""),
        },
        "build": build,
        "benchmark": keep_bench,
    }
    atomic_write_text(path, render_config(values))


def add_definition(root: Path, definition: str, language: str | None = None) -> SwitchResult:
    """Add ``definition``'s starter beside the fork's kernel instead of replacing it.

    The first time, the fork becomes a track fork (:mod:`fib_core.project.track`): the current
    kernel moves from ``solution/<language>/`` to ``solution/<its definition>/<language>/``
    and ``config.toml`` gains a ``[track]`` table; the new starter goes to
    ``solution/<definition>/<language>/`` and gets its ``[track.<definition>]`` table. Only
    definitions of the fork's own track can be added.
    """
    root = Path(root)
    starters = available_starters(root)
    definition = _resolve_definition(root, definition, starters)
    path = root / "config.toml"
    cfg = load_config(path)
    current = cfg.solution.definition
    held = cfg.track or (current,)
    if definition in held:
        raise ConfigError(f"{path}: this fork already holds {definition}")
    track = track_of_definition(current)
    if track_of_definition(definition) != track:
        raise ConfigError(
            f"{definition} is not in this fork's track ({track}: "
            f"{', '.join(TRACKS.get(track or '', ()))}); a fork holds one track"
        )
    languages = starters[definition]
    language = language or ("triton" if "triton" in languages else languages[0])
    if language not in languages:
        raise ConfigError(
            f"definition '{definition}' has no {language} starter; available: {', '.join(languages)}"
        )
    target = root / "solution" / definition / language
    if target.exists() and any(target.iterdir()):
        raise ConfigError(f"{target} already holds files; move them away first")
    if not cfg.track:  # first addition: the current kernel moves into its definition's folder
        old = root / "solution" / cfg.build.language
        new = root / "solution" / current / cfg.build.language
        if not old.is_dir():
            raise ConfigError(f"{old}: not found; the fork's kernel should be there")
        new.parent.mkdir(parents=True, exist_ok=True)
        old.rename(new)
    starter_dir = root / "starters" / definition / language
    settings = read_starter(starter_dir)
    shutil.copytree(starter_dir, target, ignore=shutil.ignore_patterns(STARTER_FILE, "__pycache__"))
    data = read_toml(path)
    tables = {k: v for k, v in (data.get("track") or {}).items() if k != "definitions"}
    tables[definition] = {
        "name": f"{cfg.solution.author}-{definition}-{language}",
        "description": settings.get("solution", {}).get("description", ""),
        **settings["build"],
    }
    ordered = [d for d in TRACKS[track] if d in (*held, definition)]  # type: ignore[index]
    values = config_values(cfg)
    values["build"] = written_build(values["build"])
    text = render_config(values, track=True) + render_track(ordered, tables)
    atomic_write_text(path, text)
    load_config(path)  # what was written must load
    return SwitchResult(definition, language, target, None)
