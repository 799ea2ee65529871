"""How each definition is graded: the organizers' numbers, and how a local run differs.

The settings table (:mod:`fib_core.bench.settings`) says which knobs exist;
``BenchmarkConfig`` (:mod:`fib_core.bench.config`) holds one run's values; this module holds
the values each definition is graded with.

One TOML file per definition, ``eval.toml`` in its definition folder (see
:mod:`fib_core.dataset.registry`):

- ``[contest]``: the organizers' flags for that definition (warmup, iterations, trials,
  timeout, isolation, timing method, tolerances). ``run_local.py --contest`` runs exactly these.
- ``[local]``: what an everyday local run changes for turnaround (a persistent worker instead
  of one process per workload); every key not listed is the contest's. These are the kit's
  defaults; ``config.toml`` ``[benchmark]`` and command-line flags override them as before.
- ``[reference]``: ``timed_calls``, how many reference calls (the ones that produce the first
  input sets' outputs) are timed with the definition's own reference for its latency; the
  first call of a definition's reference in a process runs once more, untimed, to warm up.
  Other sets may come from a faster reference of the same arithmetic.

A definition without a file (a user's own dataset) gets the organizers' generic defaults, and
their packaged default tolerance for its op_type (:data:`OP_TYPE_TOLERANCE`). This module is the
one home of the organizers' numbers; :mod:`fib_core.bench.evaluation.check` reads its
tolerances here.
Keys use the ``config.toml`` names (:mod:`fib_core.bench.settings`, whose :func:`~fib_core.
bench.settings.merge` layers these under ``config.toml`` and flags).

Example::

    from fib_core.bench.grading import eval_settings
    s = eval_settings("gdn_prefill_qk4_v8_d128_k_last")
    s.local_fields()    # {'warmup_runs': 1, 'iterations': 5, 'num_trials': 3, ...}
    s.contest_fields()  # the organizers' settings, tolerances included
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fib_core.bench.settings import SETTINGS, by_key, from_keys
from fib_core.dataset import registry
from fib_core.errors import ConfigError

# The keys a definition's file may set: the settings table's per-definition rows.
KEYS: tuple[str, ...] = tuple(s.key for s in SETTINGS if s.per_definition and s.key)
# The organizers' defaults (their CLI's), used for a definition without a settings file. The
# counts and the timeout are the kit's own defaults too, so they are read from the settings table
# (one home); the organizers differ from an everyday local run in isolation and timer only.
ORGANIZER_DEFAULTS: dict[str, Any] = {
    **{key: by_key(key).default for key in ("warmup", "iterations", "trials", "timeout")},
    "isolated": True,
    "timing_method": "cupti",
}
# Their correctness defaults (an element fails beyond both; every element must match).
ORGANIZER_TOLERANCE: dict[str, float] = {"atol": 1e-2, "rtol": 1e-2, "required_matched_ratio": 1.0}
# Their packaged evaluator's default by op_type, used when no flag sets the value (their fp8 MoE
# evaluator accepts 5 % of outliers). A definition's eval.toml [contest] holds the flags the
# contest passes and wins over this: the kit's MoE definition is graded at 0.9 there.
OP_TYPE_TOLERANCE: dict[str, dict[str, float]] = {"moe": {"required_matched_ratio": 0.95}}
LOCAL_DEFAULTS: dict[str, Any] = {"isolated": False, "timing_method": "auto"}
DEFAULT_TIMED_CALLS = 10


@dataclass(frozen=True)
class EvalSettings:
    """One definition's settings, in config.toml key names (see the module docstring)."""

    definition: str
    contest: dict[str, Any]
    local: dict[str, Any]
    reference_timed_calls: int = DEFAULT_TIMED_CALLS
    source: Path | None = None
    # The definition's op_type where the registry knows it: picks the organizers' op_type
    # default tolerance (OP_TYPE_TOLERANCE) for keys the file does not set.
    op_type: str | None = None

    def local_fields(self) -> dict[str, Any]:
        """BenchmarkConfig fields of an everyday local run: the contest's, then ``[local]``.

        Tolerances are left out: the engine applies the contest's by definition name (see
        :func:`contest_tolerance`), below a definition's own ``"tolerance"`` key."""
        merged = {
            k: v for k, v in {**self.contest, **self.local}.items() if k not in ORGANIZER_TOLERANCE
        }
        return engine_fields(merged)

    def contest_fields(self) -> dict[str, Any]:
        """BenchmarkConfig fields of an organizers' run: their counts, isolation, timeout,
        timer and every tolerance (their defaults where the file sets none)."""
        return engine_fields({**self.contest, **self.contest_tolerance()})

    def contest_tolerance(self) -> dict[str, float]:
        """Every tolerance the organizers grade this definition with: their defaults, their
        op_type default, then the file's [contest] values (the flags they pass)."""
        own = {k: float(self.contest[k]) for k in ORGANIZER_TOLERANCE if k in self.contest}
        return {**ORGANIZER_TOLERANCE, **OP_TYPE_TOLERANCE.get(self.op_type or "", {}), **own}

    def describe_contest(self) -> str:
        """One line for a run title, e.g. 'isolated, warmup 1, 5 iterations x 3 trials, ...'."""
        c = {**self.contest, **self.contest_tolerance()}
        parts = [
            "isolated" if c.get("isolated") else "persistent worker",
            f"warmup {c['warmup']}",
            f"{c['iterations']} iterations x {c['trials']} trials",
            f"timeout {c['timeout']:g} s",
            f"timer {c['timing_method']}",
            f"atol {c['atol']:g} rtol {c['rtol']:g} matched {c['required_matched_ratio']:g}",
        ]
        return ", ".join(parts)


def engine_fields(values: dict[str, Any]) -> dict[str, Any]:
    """config.toml-named keys -> BenchmarkConfig field names (unknown keys are an error)."""
    unknown = sorted(set(values) - set(KEYS))
    if unknown:
        raise ConfigError(f"evaluation settings: unknown key {unknown[0]!r}")
    return from_keys(values)


def eval_settings(definition_name: str, folder: Path | None = None) -> EvalSettings:
    """The settings of ``definition_name``: ``<folder>/<definition_name>.toml`` when ``folder``
    is given, else the ``eval.toml`` of its definition folder."""
    if folder is not None:
        return _load(definition_name, str(Path(folder) / f"{definition_name}.toml"))

    entry = registry.get(definition_name)
    if entry is None:
        return _load(definition_name, "")
    path = entry.settings_path
    op_type = entry.definition_json().get("op_type")
    return _load(
        definition_name,
        str(path) if path is not None else "",
        op_type if isinstance(op_type, str) else None,
    )


def contest_tolerance(definition_name: str) -> dict[str, float]:
    """The tolerances the organizers pass as flags for this definition: its file's [contest]
    values only (empty when they grade it with their defaults)."""
    s = eval_settings(definition_name)
    return {k: float(s.contest[k]) for k in ORGANIZER_TOLERANCE if k in s.contest}


@lru_cache(maxsize=64)
def _load(definition_name: str, file: str, op_type: str | None = None) -> EvalSettings:
    path = Path(file)
    if not file or not path.is_file():
        return EvalSettings(
            definition_name, dict(ORGANIZER_DEFAULTS), dict(LOCAL_DEFAULTS), op_type=op_type
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: not a readable TOML file ({err}); fix or delete it") from None
    unknown = sorted(set(data) - {"contest", "local", "reference"})
    if unknown:
        raise ConfigError(
            f"{path}: unknown section [{unknown[0]}]; expected [contest], [local], [reference]"
        )
    contest = {**ORGANIZER_DEFAULTS, **_section(path, data, "contest")}
    local = {**LOCAL_DEFAULTS, **_section(path, data, "local")}
    ref = data.get("reference", {})
    if not isinstance(ref, dict) or set(ref) - {"timed_calls"}:
        raise ConfigError(f"{path}: [reference] takes only timed_calls (a whole number >= 1)")
    timed = ref.get("timed_calls", DEFAULT_TIMED_CALLS)
    if not isinstance(timed, int) or isinstance(timed, bool) or timed < 1:
        raise ConfigError(
            f"{path}: [reference] timed_calls = {timed!r}; expected a whole number >= 1"
        )
    return EvalSettings(definition_name, contest, local, timed, path, op_type)


def _section(path: Path, data: dict[str, Any], name: str) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{name}] must be a table of keys")
    for key, value in table.items():
        if key not in KEYS:
            raise ConfigError(
                f"{path}: [{name}] unknown key {key!r}; expected one of {', '.join(KEYS)}"
            )
        setting = by_key(key)
        types = setting.toml_types
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ConfigError(f"{path}: [{name}] {key} = {value!r} has the wrong type")
        why = setting.toml_problem(value)
        if why is not None:
            raise ConfigError(f"{path}: [{name}] {key} = {value!r}; expected {why}")
    return dict(table)
