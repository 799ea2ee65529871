"""The contest's track score: the mean of the track's definition scores.

Contest rule: a track's score is the average of its definitions' scores, and a missing or
failing definition halves a two-definition track's score. Both follow from one rule, applied
here: a definition without a result, or whose solution fails (score 0: any failed workload
fails the solution), counts as 0 in the mean over *all* of the track's definitions. The
formula itself is :func:`fib_core.data.scoring.track_mean`, the one the dataset's
``SpeedupMetrics.track_score`` uses too; this module adds which definitions a track expects
and how each counted.

Example::

    from fib_core.project.track_score import track_score
    ts = track_score("gated_delta_net", {"gdn_decode_qk4_v8_d128_k_last": 2.0})
    print(ts.score, ts.missing)    # 1.0 ('gdn_prefill_qk4_v8_d128_k_last',)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from fib_core.data.scoring import track_mean
from fib_core.dataset.tracks import TRACKS


@dataclass(frozen=True)
class TrackScore:
    """A track's score and how each definition counted.

    ``scores`` holds every definition of the track, None where it had no result.
    """

    track: str
    score: float
    scores: dict[str, float | None]
    missing: tuple[str, ...]
    failing: tuple[str, ...]

    @property
    def complete(self) -> bool:
        """Every definition present and passing: nothing reduces the mean."""
        return not self.missing and not self.failing

    def lines(self) -> list[str]:
        """One line per definition and the track's, for a terminal."""
        out = []
        for name, value in self.scores.items():
            if value is None:
                out.append(f"  {name:<56} missing (counts 0)")
            elif name in self.failing:
                out.append(f"  {name:<56} failing (counts 0)")
            else:
                out.append(f"  {name:<56} {value:.3f}x")
        note = ""
        if not self.complete:
            n = len(self.missing) + len(self.failing)
            note = f"  ({n} of {len(self.scores)} definitions count 0)"
        out.append(f"track {self.track}: {self.score:.3f}x{note}")
        return out


def track_score(track: str, scores: Mapping[str, float | None]) -> TrackScore:
    """The score of ``track`` from its definitions' scores (absent or None: missing).

    A definition score is the contest's: mean speedup, 0 when any workload failed.

    >>> track_score("gated_delta_net", {"gdn_decode_qk4_v8_d128_k_last": 3.0,
    ...                                 "gdn_prefill_qk4_v8_d128_k_last": 1.0}).score
    2.0
    >>> track_score("gated_delta_net", {"gdn_decode_qk4_v8_d128_k_last": 3.0,
    ...                                 "gdn_prefill_qk4_v8_d128_k_last": 0.0}).score
    1.5
    """
    if track not in TRACKS:
        raise ValueError(f"unknown track {track!r}; tracks: {', '.join(TRACKS)}")
    definitions = TRACKS[track]
    stray = [name for name in scores if name not in definitions]
    if stray:
        raise ValueError(f"{', '.join(stray)} not in track {track} ({', '.join(definitions)})")
    full: dict[str, float | None] = {}
    for name in definitions:
        value = scores.get(name)
        if value is not None and (not math.isfinite(value) or value < 0):
            raise ValueError(f"score of {name}: found {value}, expected a finite number >= 0")
        full[name] = value
    missing = tuple(n for n, v in full.items() if v is None)
    failing = tuple(n for n, v in full.items() if v is not None and v == 0)
    return TrackScore(
        track=track,
        score=track_mean((v for v in full.values() if v is not None), len(definitions)),
        scores=full,
        missing=missing,
        failing=failing,
    )


def contest_track_lines(track: str, contest: Mapping[str, Mapping | None]) -> list[str]:
    """The track's contest score (against the FlashInfer baselines) and what it covers.

    ``contest``: definition -> its run's ``contest_score`` (a ContestScore as a dict), None for
    a definition that ran without one. A definition without a figure, missing from the fork, or
    failing counts 0, as in the contest; the lines say which definitions the score covers.

    >>> contest_track_lines("gated_delta_net", {"gdn_decode_qk4_v8_d128_k_last": {"score": 1.5}})[0]
    'contest score of track gated_delta_net: 0.750x (1 of 2 definitions scored; the others count 0)'
    """
    scores = {name: (c or {}).get("score") for name, c in contest.items()}
    ts = track_score(track, scores)
    scored = [name for name, value in ts.scores.items() if value is not None]
    cover = f"{len(scored)} of {len(ts.scores)} definitions scored"
    if len(scored) < len(ts.scores):
        cover += "; the others count 0"
    out = [f"contest score of track {track}: {ts.score:.3f}x ({cover})"]
    for name, value in ts.scores.items():
        if value is not None:
            out.append(f"  {name:<56} {value:.3f}x vs FlashInfer")
            continue
        reason = (contest.get(name) or {}).get("reason")
        why = reason or ("not in this fork" if name not in contest else "no contest score")
        out.append(f"  {name:<56} counts 0: {why}")
    return out
