"""Every benchmark setting, once: the table the config file, the flags and the engine read.

One :class:`Setting` per knob says its engine name (a :class:`~fib_core.bench.config.
BenchmarkConfig` field), type, default, valid values, help line, its ``config.toml``
``[benchmark]`` key (also the key of a definition's ``eval.toml``), its flag in
``scripts/run_local.py`` (and ``scripts/run_modal.py`` where Modal exposes it) and in
``python -m fib_core run``. Those four places are built from :data:`SETTINGS`, so a new setting
is one row here, and a flag, a key and a field can no longer disagree.

:func:`merge` is the one precedence rule of a run, lowest first: the built-in defaults (the
table's, applied by ``BenchmarkConfig``), the definition's ``eval.toml``, the CPU smoke-run
counts (no GPU: correctness only), ``config.toml`` ``[benchmark]``, then the flags that were
actually given.

Example::

    from fib_core.bench.settings import by_key, merge

    by_key("trials").name                         # 'num_trials'
    merge(definition={"iterations": 5}, config={"iterations": 20}, flags={"warmup_runs": 3})
    # {'iterations': 20, 'warmup_runs': 3}
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fib_core.errors import ConfigError

DEVICES = ("auto", "cuda", "cpu")
TIMING_METHODS = ("auto", "cupti", "profiler", "events", "wall-clock")

# The type words of one-line messages ("must be a whole number").
TYPE_WORDS = {int: "whole number", float: "number", bool: "boolean", str: "string", tuple: "list"}


@dataclass(frozen=True)
class Setting:
    """One benchmark setting and every place it is spelled.

    ``kind`` is int, float, bool, str or tuple (a list of names). ``nullable``: None is a valid
    value (= "the definition's own"). ``low``/``high`` bound numbers (``low_open``: strictly
    above ``low``). ``choices`` are what the engine accepts, ``offered`` what ``config.toml``
    and ``run_local.py`` offer (default: ``choices``). ``flag`` is the flag of
    ``run_local.py`` (and of ``run_modal.py`` when ``modal``), ``cli_flag`` that of
    ``python -m fib_core run``; None = no such flag.
    """

    name: str
    kind: type
    default: Any
    help: str
    key: str | None = None
    per_definition: bool = False
    flag: str | None = None
    cli_flag: str | None = None
    modal: bool = False
    nullable: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] = ()
    offered: tuple[str, ...] = ()
    example: Any = None
    metavar: str | None = None
    cli_help: str | None = None

    @property
    def toml_types(self) -> tuple[type, ...]:
        """The TOML value types accepted for it (a whole number is a valid float)."""
        return {float: (int, float), tuple: (list,)}.get(self.kind, (self.kind,))

    @property
    def user_choices(self) -> tuple[str, ...]:
        return self.offered or self.choices

    def expected(self) -> str:
        """What a valid value is, in words (the tail of an error line)."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.kind is tuple:
            return "a list of names"
        if self.kind is bool:
            return "true or false"
        noun = "an integer" if self.kind is int else "a number"
        if self.low is not None and self.high is not None:
            return f"{noun} in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{noun} {'>' if self.low_open else '>='} {self.low:g}"
        return noun

    def problem(self, value: Any) -> str | None:
        """None when ``value`` is valid for the engine, else :meth:`expected`."""
        if value is None:
            return None if self.nullable else self.expected()
        if self.kind is tuple:
            ok = not isinstance(value, str) and all(isinstance(v, str) for v in value)
        elif self.kind is bool:
            ok = isinstance(value, bool)
        elif self.kind is str:
            ok = isinstance(value, str) and (not self.choices or value in self.choices)
        else:
            ok = _is_number(value) and (self.kind is float or isinstance(value, int))
            if ok and self.low is not None:
                ok = value > self.low if self.low_open else value >= self.low
            if ok and self.high is not None:
                ok = value <= self.high
        return None if ok else self.expected()

    def toml_problem(self, value: Any) -> str | None:
        """Like :meth:`problem`, for a value read from a TOML file (the offered choices)."""
        if self.offered and value not in self.offered:
            return "one of " + ", ".join(self.offered)
        return self.problem(tuple(value) if isinstance(value, list) else value)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# fmt: off
SETTINGS: tuple[Setting, ...] = (
    Setting("warmup_runs", int, 10, "warm-up calls before timing (default: the definition's eval.toml, 10 for most)", key="warmup", per_definition=True, flag="--warmup", cli_flag="--warmup-runs", modal=True, low=0, example=10, metavar="N"),
    Setting("iterations", int, 50, "timed calls per trial (default: the definition's eval.toml, 50 for most)", key="iterations", per_definition=True, flag="--iterations", cli_flag="--iterations", modal=True, low=1, example=50, metavar="N"),
    Setting("num_trials", int, 3, "trials; the latency is the mean of their medians (default 3)", key="trials", per_definition=True, flag="--trials", cli_flag="--num-trials", modal=True, low=1, example=3, metavar="N"),
    Setting("timeout_seconds", float, 300.0, "seconds per workload, build included (default 300)", key="timeout", per_definition=True, flag="--timeout", cli_flag="--timeout", modal=True, low=0, low_open=True, example=300, metavar="SECONDS"),
    Setting("atol", float, None, "absolute tolerance (default: the definition's)", key="atol", per_definition=True, flag="--atol", cli_flag="--atol", nullable=True, low=0, example=0.01),
    Setting("rtol", float, None, "relative tolerance (default: the definition's)", key="rtol", per_definition=True, flag="--rtol", cli_flag="--rtol", nullable=True, low=0, example=0.01),
    Setting("required_matched_ratio", float, None, "fraction of elements that must match (default: the definition's)", key="required_matched_ratio", per_definition=True, flag="--required-matched-ratio", cli_flag="--required-matched-ratio", nullable=True, low=0, high=1, example=1.0, metavar="R"),
    Setting("workloads", tuple, None, 'workload filter: uuid prefixes or axis filters like "batch_size=64"', key="workloads", flag="--workloads", cli_flag="--workloads", modal=True, nullable=True, example=["batch_size>=16"], metavar="FILTER", cli_help="only these workloads (uuid or a prefix of 6+ characters)"),
    Setting("seed", int, 0, "input seed (default 0)", key="seed", flag="--seed", cli_flag="--seed", low=0, example=0, metavar="N"),
    Setting("timing_method", str, "auto", "auto | cupti | profiler | events (default auto: the device span of each call)", key="timing_method", per_definition=True, flag="--timing-method", choices=TIMING_METHODS, offered=("auto", "cupti", "profiler", "events"), example="auto"),
    Setting("isolated", bool, False, "one process per workload, as the organizers grade", key="isolated", per_definition=True, flag="--isolated", cli_flag="--isolated", modal=True, example=False),
    Setting("device", str, "auto", "where to run (default: the GPU when torch sees one)", flag="--device", cli_flag="--device", choices=DEVICES, offered=("cuda", "cpu")),
    Setting("definitions", tuple, None, "only these definitions", cli_flag="--definitions", nullable=True, metavar="NAME"),
    Setting("solutions", tuple, None, "only these solutions", cli_flag="--solutions", nullable=True, metavar="NAME"),
    Setting("num_input_sets", int, 4, "input sets checked before timing", low=1),
    Setting("profile_baseline", bool, True, "also time the reference (speedups need it)"),
    Setting("allow_input_mutation", bool, False, "a solution may write into its inputs"),
    Setting("generator_modules", tuple, (), "modules each worker imports first (user generators)"),
    Setting("input_memory_fraction", float, 0.4, "share of free device memory the rotated input sets may take", low=0, high=1, low_open=True),
    Setting("reference_time_budget_s", float, 20.0, "cap on the seconds spent timing the reference per trial", low=0, low_open=True),
)
# fmt: on

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS if s.key}

# A CPU run only proves correctness; keep it short, but still catch a kernel that replays
# results: two input sets checked before timing, and the one timed call (on a third set)
# re-checked. The reference is not timed (a CPU has no score to compute), and the limit is
# sized for the Triton interpreter and the full-size references on a small machine.
CPU_SMOKE: dict[str, Any] = {
    "warmup_runs": 0,
    "iterations": 1,
    "num_trials": 1,
    "num_input_sets": 2,
    "profile_baseline": False,
    "timeout_seconds": 1800.0,
}


def default(name: str) -> Any:
    """The built-in default of setting ``name`` (BenchmarkConfig's field default)."""
    return BY_NAME[name].default


def by_key(key: str) -> Setting:
    """The setting of a ``config.toml``/``eval.toml`` key (KeyError when there is none)."""
    return BY_KEY[key]


def check_value(name: str, value: Any, where: str = "benchmark config") -> Any:
    """``value`` for setting ``name`` (lists become tuples); a ConfigError naming it if invalid."""
    why = BY_NAME[name].problem(value)
    if why is not None:
        raise ConfigError(f"{where}: {name} = {value!r}; expected {why}")
    return tuple(value) if BY_NAME[name].kind is tuple and value is not None else value


def from_keys(values: Mapping[str, Any]) -> dict[str, Any]:
    """``config.toml``-named keys -> setting names (timeouts as floats, lists as tuples)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        s = BY_KEY[key]
        if s.kind is float:
            value = float(value)
        elif s.kind is tuple:
            value = tuple(value)
        out[s.name] = value
    return out


def merge(
    *,
    definition: Mapping[str, Any] | None = None,
    cpu: bool = False,
    config: Mapping[str, Any] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The settings a run uses above the built-in defaults, by setting name; later layers win.

    ``definition``: the definition's ``eval.toml`` fields (``EvalSettings.local_fields()``, or
    ``contest_fields()`` for ``--contest``); ``cpu``: the run has no GPU, so the smoke-run
    counts (:data:`CPU_SMOKE`) come next; ``config``: ``config.toml`` ``[benchmark]`` by its
    keys (``{"trials": 5}``); ``flags``: only the flags that were given (None values are "not given").
    """
    merged: dict[str, Any] = dict(definition or {})
    if cpu:
        merged.update(CPU_SMOKE)
    unknown_keys = sorted(set(config or {}) - set(BY_KEY))
    if unknown_keys:
        raise ConfigError(f"benchmark settings: unknown config key {unknown_keys[0]!r}")
    merged.update(from_keys(config or {}))
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    unknown = sorted((set(merged) | set(given)) - set(BY_NAME))
    if unknown:
        raise ConfigError(f"benchmark settings: unknown setting {unknown[0]!r}")
    for name, value in given.items():  # a bad flag is named as the user typed it
        spellings = dict.fromkeys(f for f in (BY_NAME[name].flag, BY_NAME[name].cli_flag) if f)
        given[name] = check_value(name, value, where="flag " + " / ".join(spellings))
    merged.update(given)
    return merged


# ---- command lines ------------------------------------------------------------------------

LOCAL = "local"  # scripts/run_local.py (config.toml's choices)
CLI = "cli"  # python -m fib_core run (every engine value)


def _flag_of(s: Setting, style: str) -> str | None:
    return s.flag if style == LOCAL else s.cli_flag


def add_flags(parser: argparse.ArgumentParser, style: str) -> None:
    """Add every setting's flag of ``style`` (:data:`LOCAL` or :data:`CLI`) to ``parser``.

    Every flag defaults to None ("not given"), so :func:`flags_given` sees only what the user
    typed; each one's value lands under the setting's name."""
    for s in SETTINGS:
        flag = _flag_of(s, style)
        if flag is None:
            continue
        help_text = (s.cli_help if style == CLI else None) or s.help
        kwargs: dict[str, Any] = {"dest": s.name, "default": None, "help": help_text}
        if s.kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif s.kind is tuple:
            kwargs.update(nargs="+", metavar=s.metavar or "NAME")
        elif s.choices:
            kwargs["choices"] = list(s.user_choices if style == LOCAL else s.choices)
        else:
            kwargs.update(type=s.kind, metavar=s.metavar)
        parser.add_argument(flag, **kwargs)


def flags_given(args: argparse.Namespace | Mapping[str, Any], style: str) -> dict[str, Any]:
    """Setting name -> value for exactly the ``style`` flags that were given (lists as tuples)."""
    get = args.get if isinstance(args, Mapping) else lambda n: getattr(args, n, None)
    out: dict[str, Any] = {}
    for s in SETTINGS:
        if _flag_of(s, style) is None:
            continue
        value = get(s.name)
        if value is not None:
            out[s.name] = tuple(value) if isinstance(value, list) else value
    return out


def flag_name(name: str) -> str:
    """``--iterations`` for setting ``iterations``: how run_local.py spells it."""
    s = BY_NAME[name]
    return s.flag or s.cli_flag or "--" + name.replace("_", "-")


# ---- Modal's command line (its options come from a function's signature) -------------------


def modal_settings() -> tuple[Setting, ...]:
    """The settings ``run_modal.py`` exposes."""
    return tuple(s for s in SETTINGS if s.modal)


def modal_parameters() -> list[inspect.Parameter]:
    """Keyword parameters for Modal's entry point, one per exposed setting, default None (=
    not given); a list setting is one space-separated string."""
    params = []
    for s in modal_settings():
        kind = str if s.kind is tuple else s.kind
        name = s.flag.removeprefix("--").replace("-", "_") if s.flag else s.name
        params.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind | None
            )
        )
    return params


def modal_flags(values: Mapping[str, Any]) -> dict[str, Any]:
    """Setting name -> value from Modal's keyword arguments (see :func:`modal_parameters`)."""
    out: dict[str, Any] = {}
    for s in modal_settings():
        name = s.flag.removeprefix("--").replace("-", "_") if s.flag else s.name
        value = values.get(name)
        if value is None:
            continue
        out[s.name] = tuple(value.split()) if s.kind is tuple else value
        if s.kind is tuple and not out[s.name]:
            del out[s.name]
    return out


def with_modal_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give ``fn(..., **settings)`` a signature naming each exposed setting, so Modal's
    command line (built from the signature) offers them: the table stays the only list."""
    sig = inspect.signature(fn)
    fixed = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    extra = modal_parameters()
    fn.__signature__ = sig.replace(parameters=[*fixed, *extra])  # type: ignore[attr-defined]
    fn.__annotations__ = {
        **{k: v for k, v in fn.__annotations__.items() if k != "settings"},
        **{p.name: p.annotation for p in extra},
    }
    return fn
