"""What the launchers share for ``--definition NAME`` and ``--track``.

``run_local.py``, ``run_modal.py`` and ``pack_solution.py`` run one definition of the fork at a
time; with ``--track`` they loop over every definition the fork holds and end with the track
score (:func:`fib_core.project.track_score.track_score`), which counts a definition of the
track that the fork lacks, or that failed, as 0.

Example::

    from fib_core.project.track_run import selected_definitions
    for name in selected_definitions("config.toml", definition=None, track=True):
        ...
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fib_core.dataset.tracks import track_of_definition
from fib_core.errors import ConfigError
from fib_core.project.track import track_definitions
from fib_core.project.track_score import TrackScore, contest_track_lines, track_score


def selected_definitions(
    config_path: str | Path, definition: str | None, track: bool
) -> list[str | None]:
    """The definitions a launcher runs: all with ``track``, ``[definition]``, or ``[None]``
    (the default one)."""
    if track and definition:
        raise ConfigError("--track runs every definition; drop --definition or --track")
    if track:
        return list(track_definitions(config_path))
    return [definition]


def per_definition_path(path: Path | None, definition: str, several: bool) -> Path | None:
    """``run.json`` -> ``run-<definition>.json`` when several definitions write one file each."""
    if path is None or not several:
        return path
    return path.with_name(f"{path.stem}-{definition}{path.suffix}")


def options_for(opts: Any, definition: str, several: bool) -> Any:
    """A copy of run options whose output files carry ``definition`` when several run."""
    one = copy.copy(opts)
    for name in ("json_path", "html_path", "traces_path"):
        if hasattr(one, name):
            setattr(one, name, per_definition_path(getattr(one, name), definition, several))
    return one


def score_track(results: Mapping[str, Any]) -> TrackScore | None:
    """The track score of ``definition -> RunResults`` (None: no GPU figures to score).

    A CPU smoke run measures no speedup, so it has no score: None then, never a 0 that would
    read as a failure.
    """
    # Imported here: fib_core.report.summary loads rich (~55 ms); this module's import does not.
    from fib_core.report.summary import summarize

    if not results:
        return None
    if any(r.is_cpu_smoke for r in results.values()):
        return None
    track = track_of_definition(next(iter(results)))
    if track is None:
        return None
    return track_score(track, {d: summarize(r).score for d, r in results.items()})


def print_track_summary(results: Mapping[str, Any], codes: Mapping[str, int], console: Any) -> None:
    """The per-definition verdicts and the track score (or why there is none)."""
    ts = score_track(results)
    console.print("")
    if ts is None:
        console.print("[bold]track[/] (CPU smoke: correctness only, no score)")
        for name, code in codes.items():
            console.print(f"  {name:<56} {'passed' if code == 0 else 'FAILED'}", highlight=False)
        return
    for line in ts.lines():
        console.print(line, highlight=False)

    contest = {name: r.contest for name, r in results.items()}
    for line in contest_track_lines(ts.track, contest):
        console.print(line, highlight=False)
