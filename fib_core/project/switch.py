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

from fib_core.errors import ConfigError
from fib_core.project.config import SCHEMA, closest, load_config
from fib_core.project.template import config_values, render_config
from fib_core.project.tracks import TRACKS, track_of

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
                f"{target} holds your own work; refusing to overwrite it. Commit or move it, "
                "or pass --force (the old folder is then kept as a backup)"
            )
        backup = target.with_name(f"{language}.backup-{time.strftime('%Y%m%d-%H%M%S')}")
        target.rename(backup)
    elif target.exists():
        shutil.rmtree(target)
    shutil.copytree(
        starter_dir, target, ignore=shutil.ignore_patterns(STARTER_FILE, "__pycache__")
    )
    _rewrite_config(root / "config.toml", definition, settings)
    return SwitchResult(definition, language, target, backup)


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
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(render_config(values), encoding="utf-8")
    tmp.replace(path)
