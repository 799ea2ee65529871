"""``config.toml``: the one file that says what a fork builds and how it is benchmarked.

The schema is a table (``SCHEMA``) rather than code spread over parsers, so that loading,
validation messages, the documented template written by the switch script, and the README all
come from one place. Every mistake is reported as one line naming the file, the key and what
to do (a :class:`~fib_core.errors.ConfigError`).

Example::

    from fib_core.project.config import load_config
    cfg = load_config("config.toml")
    print(cfg.solution.definition, cfg.build.entry_point)
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any

from fib_core.bench.settings import SETTINGS
from fib_core.dataset.tracks import TRACKS, track_of, track_of_definition
from fib_core.errors import ConfigError

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")  # a solution name: also a file name

LANGUAGES = ("triton", "cuda", "python")
_TYPE_WORDS = {str: "string", int: "whole number", float: "number", bool: "boolean", list: "list"}
BINDINGS = ("tvm-ffi", "torch")
# Tables beside SCHEMA's that other modules validate: a whole track in one fork, audit settings.
EXTRA_SECTIONS = ("track", "audit")


@dataclass(frozen=True)
class Key:
    """One documented config key: its type, default (None = not set) and what it means."""

    types: tuple[type, ...]
    default: Any
    doc: str
    required: bool = False
    choices: tuple[str, ...] | None = None
    example: Any = None  # shown commented-out in a written config.toml when the key is unset
    # Further validation (ranges): None when the value is fine, else what it must be.
    check: Callable[[Any], str | None] | None = None


SCHEMA: dict[str, dict[str, Key]] = {
    "solution": {
        "name": Key((str,), None, "unique name of your solution (letters, digits, - _ .)", True,
                    check=lambda v: None if _NAME.fullmatch(v) else
                    "letters, digits, '-', '_' and '.', not starting with '.'"),
        "definition": Key(
            (str,),
            None,
            "exact definition name (not the track), e.g. gdn_decode_qk4_v8_d128_k_last",
            True,
        ),
        "author": Key((str,), None, "your team name, as registered for the contest", True),
        "description": Key((str,), "", "one line on what the kernel does"),
    },
    "build": {
        "language": Key((str,), None, "triton | cuda | python", True, LANGUAGES),
        "entry_point": Key(
            (str,), None, "file::function inside solution/<language>/, e.g. kernel.py::run", True
        ),
        "destination_passing_style": Key(
            (bool,),
            True,
            "true: run(inputs..., outputs...) writes into preallocated outputs; "
            "false: run(inputs...) returns the outputs",
        ),
        "binding": Key(
            (str,), "tvm-ffi", "CUDA only: tvm-ffi | torch", False, BINDINGS, example="tvm-ffi"
        ),
        "target_hardware": Key(
            (list,), ["B200"], "GPUs the solution is written for", example=["B200"]
        ),
        "dependencies": Key(
            (list,),
            [],
            'e.g. ["CUTLASS_3_7"] for CUDA solutions using CUTLASS',
            example=["CUTLASS_3_7"],
        ),
        "cuda_arch": Key(
            (str,),
            None,
            "CUDA only: sm_100a (B200), sm_90a (H100/H200); default: detected from the GPU",
            example="sm_100a",
        ),
        "extra_cuda_cflags": Key(
            (list,), [], "CUDA only: extra nvcc flags", example=["-O3", "--use_fast_math"]
        ),
        "extra_cflags": Key(
            (list,), [], "CUDA/C++ only: extra host compiler flags", example=["-O3"]
        ),
        "extra_ldflags": Key(
            (list,), [], "CUDA/C++ only: extra linker flags", example=["-lcublas"]
        ),
        "include_dirs": Key(
            (list,), [], "CUDA/C++ only: extra include folders", example=["include"]
        ),
    },
    # Built from the settings table: the same rows give the flags and the engine's fields.
    "benchmark": {
        s.key: Key(
            s.toml_types,
            None,
            s.help,
            choices=s.offered or s.choices or None,
            example=s.example,
            check=s.toml_problem,
        )
        for s in SETTINGS
        if s.key
    },
}


# Keys a [track.<definition>] table may hold: its own [solution] keys and every [build] key.
OWN_SOLUTION_KEYS = ("name", "description")
TABLE_KEYS = (*OWN_SOLUTION_KEYS, *SCHEMA["build"])


@dataclass
class SolutionConfig:
    name: str
    definition: str
    author: str
    description: str = ""


@dataclass
class BuildConfig:
    language: str
    entry_point: str
    destination_passing_style: bool = True
    binding: str = "tvm-ffi"
    target_hardware: list[str] = field(default_factory=lambda: ["B200"])
    dependencies: list[str] = field(default_factory=list)
    cuda_arch: str | None = None
    extra_cuda_cflags: list[str] = field(default_factory=list)
    extra_cflags: list[str] = field(default_factory=list)
    extra_ldflags: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::", 1)[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.split("::", 1)[1]


def _given(self: Any) -> dict[str, Any]:
    """The keys config.toml sets (config key -> value); unset ones are left out."""
    return {k: v for k, v in vars(self).items() if v is not None}


# The optional ``[benchmark]`` table, one field per config key of the settings table; None
# means "not set" (the definition's eval.toml or the engine's default applies).
BenchmarkDefaults = make_dataclass(
    "BenchmarkDefaults",
    [(s.key, Any, None) for s in SETTINGS if s.key],
    namespace={"given": _given, "__doc__": "config.toml's [benchmark] values (None = not set)."},
)
BenchmarkDefaults.__module__ = __name__


@dataclass
class KitConfig:
    """A loaded, validated ``config.toml``. ``root`` is the folder holding it."""

    solution: SolutionConfig
    build: BuildConfig
    benchmark: Any  # a BenchmarkDefaults
    path: Path
    root: Path
    # The track's definitions when config.toml has a [track] table (fib_core.project.track):
    # each definition's sources then live in solution/<definition>/<language>/.
    track: tuple[str, ...] = ()
    # The table holding this definition's build keys: "build", or "track.<definition>" for a
    # definition of a track fork other than the default one. Messages name it.
    table: str = "build"

    @property
    def source_dir(self) -> Path:
        """The folder that gets packed: ``solution/<language>/``, or
        ``solution/<definition>/<language>/`` in a fork holding a whole track."""
        return self.root / source_folder(self.solution.definition, self.build.language,
                                         bool(self.track))


def source_folder(definition: str, language: str, in_track: bool) -> str:
    """The sources' folder relative to the fork, as messages and config.toml comments name it.

    >>> source_folder("gdn_decode_qk4_v8_d128_k_last", "triton", True)
    'solution/gdn_decode_qk4_v8_d128_k_last/triton/'
    >>> source_folder("gdn_decode_qk4_v8_d128_k_last", "triton", False)
    'solution/triton/'
    """
    return f"solution/{definition}/{language}/" if in_track else f"solution/{language}/"


def closest(word: str, options: Iterable[str]) -> str | None:
    """The option most like ``word`` (for "did you mean"), or None if nothing is close."""
    found = difflib.get_close_matches(word, list(options), n=1, cutoff=0.5)
    return found[0] if found else None


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    guess = closest(word, options)
    return f"; did you mean '{guess}'?" if guess else ""


def load_config(path: str | Path = "config.toml") -> KitConfig:
    """Read and validate ``config.toml``; raises :class:`ConfigError` with one clear line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"{path}: not found; run from the root of your fork, or pass --config PATH "
            "(scripts/switch_track.py writes a fresh one)"
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    return config_from_dict(data, path)


def config_from_dict(
    data: dict[str, Any],
    path: Path,
    *,
    table: str | None = None,
    track: tuple[str, ...] | None = None,
) -> KitConfig:
    """Validate parsed TOML ``data`` (see :data:`SCHEMA`) into a :class:`KitConfig`.

    The ``[track]`` and ``[audit]`` tables are read by their own modules
    (:mod:`fib_core.project.track`, :mod:`fib_core.project.submission_audit`). ``table`` and
    ``track`` are given for a definition of a track fork that lives in its own
    ``[track.<definition>]`` table (``data`` then holds that table's values as ``[solution]``
    and ``[build]``): messages name that table and the definition's own source folder."""
    for section in data:
        if section not in SCHEMA and section not in EXTRA_SECTIONS:
            raise ConfigError(
                f"{path}: unknown section [{section}]{_did_you_mean(section, SCHEMA)} "
                f"(valid sections: {', '.join('[' + s + ']' for s in (*SCHEMA, *EXTRA_SECTIONS))})"
            )
    values: dict[str, dict[str, Any]] = {}
    for section, keys in SCHEMA.items():
        given = data.get(section, {})
        if not isinstance(given, dict):
            raise ConfigError(f"{path}: [{section}] must be a table of keys")
        label = table if table is not None and section != "benchmark" else section
        values[section] = _section_values(path, label, given, keys)

    sol = SolutionConfig(**values["solution"])
    build = BuildConfig(**values["build"])
    bench = BenchmarkDefaults(**values["benchmark"])
    _check_definition_name(path, sol.definition)
    if track is None:
        track = parse_track(path, data)
    folder = source_folder(sol.definition, build.language, bool(track))
    _check_entry_point(path, build, table or "build", folder)
    return KitConfig(
        solution=sol,
        build=build,
        benchmark=bench,
        path=path,
        root=path.resolve().parent,
        track=track,
        table=table or "build",
    )


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
    default = (data.get("solution") or {}).get("definition")
    _check_track_list(path, defs, default)
    for key, value in table.items():
        if key != "definitions":
            _check_track_table(path, key, value, defs, default)
    for d in defs:
        if d != default and d not in table:
            raise ConfigError(
                f"{path}: [track] lists {d} but there is no [track.{d}] table "
                "(python scripts/switch_track.py DEFINITION --add writes one)"
            )
    return tuple(defs)


def _check_track_list(path: Path, defs: Any, default: Any) -> None:
    """``[track] definitions``: distinct contest definitions of one track, the default among
    them."""
    if not isinstance(defs, list) or not defs or not all(isinstance(d, str) for d in defs):
        raise ConfigError(
            f"{path}: [track] definitions must be a non-empty list of definition names"
        )
    if len(set(defs)) != len(defs):
        raise ConfigError(f"{path}: [track] definitions lists a definition twice")
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
    if len({track_of_definition(d) for d in defs}) != 1:
        known = "; ".join(t + ": " + ", ".join(v) for t, v in TRACKS.items())
        raise ConfigError(
            f"{path}: [track] definitions {defs} are not the definitions of one track ({known})"
        )


def _check_track_table(path: Path, key: str, value: Any, defs: list[str], default: str) -> None:
    """One ``[track.<definition>]`` table: a listed definition other than the default, with
    known keys only."""
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


def _section_values(path: Path, section: str, table: dict[str, Any], keys: dict[str, Key]) -> dict:
    """The keys of one table, checked; ``section`` is the table's name in messages."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in keys:
            raise ConfigError(f"{path}: [{section}] unknown key '{key}'{_did_you_mean(key, keys)}")
        spec = keys[key]
        # bool is an int in Python; do not let `warmup = true` pass as 1.
        ok = isinstance(value, spec.types) and not (
            isinstance(value, bool) and bool not in spec.types
        )
        if not ok:
            want = " or ".join("a " + _TYPE_WORDS[t] for t in spec.types)
            raise ConfigError(f"{path}: [{section}] {key} = {value!r} must be {want} ({spec.doc})")
        if spec.choices and value not in spec.choices:
            raise ConfigError(
                f"{path}: [{section}] {key} = {value!r} is not one of "
                f"{', '.join(spec.choices)}{_did_you_mean(str(value), spec.choices)}"
            )
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: [{section}] {key} must be a list of strings")
        why = spec.check(value) if spec.check is not None else None
        if why is not None:
            raise ConfigError(f"{path}: [{section}] {key} = {value!r} must be {why} ({spec.doc})")
        out[key] = value
    for key, spec in keys.items():
        if key in out:
            continue
        if spec.required:
            raise ConfigError(f"{path}: [{section}] is missing '{key}' ({spec.doc})")
        if spec.default is not None:
            out[key] = list(spec.default) if isinstance(spec.default, list) else spec.default
    return out


def _check_definition_name(path: Path, name: str) -> None:
    track = track_of(name)
    if track is not None:
        names = ", ".join(TRACKS[track])
        raise ConfigError(
            f"{path}: [solution] definition = '{name}' is a track, not a definition; "
            f"use one of the {track} definitions: {names}"
        )


def _check_entry_point(path: Path, build: BuildConfig, table: str, folder: str) -> None:
    """``entry_point``'s form; ``table`` ("build" or "track.<definition>") and ``folder`` (the
    sources' folder) are what the messages name."""
    ep = build.entry_point
    if ep.count("::") != 1 or not all(part.strip() for part in ep.split("::")):
        example = {"cuda": "kernel.cu::run"}.get(build.language, "kernel.py::run")
        raise ConfigError(
            f"{path}: [{table}] entry_point = '{ep}' must be 'file::function' "
            f"(e.g. '{example}'), the file relative to {folder}"
        )
    file = build.entry_file
    if Path(file).is_absolute() or ".." in Path(file).parts:
        raise ConfigError(
            f"{path}: [{table}] entry_point file '{file}' must be a path inside "
            f"{folder} (no absolute paths, no '..')"
        )
    suffix = Path(file).suffix
    expected = {"triton": (".py",), "python": (".py",), "cuda": (".cu", ".cpp", ".cc", ".cxx")}
    if suffix not in expected[build.language]:
        raise ConfigError(
            f"{path}: [{table}] entry_point file '{file}' does not fit language = "
            f"'{build.language}' (expected a {' or '.join(expected[build.language])} file)"
        )


def check_definition_exists(cfg: KitConfig, available: Iterable[str], dataset: str) -> None:
    """Raise a ConfigError naming the closest definitions when ``cfg``'s is not in the dataset."""
    names = sorted(available)
    if cfg.solution.definition in names:
        return
    guess = difflib.get_close_matches(cfg.solution.definition, names, n=3, cutoff=0.4)
    hint = f"; closest: {', '.join(guess)}" if guess else f"; available: {', '.join(names)}"
    raise ConfigError(
        f"{cfg.path}: [solution] definition = '{cfg.solution.definition}' is not in the "
        f"dataset at {dataset}{hint}"
    )
