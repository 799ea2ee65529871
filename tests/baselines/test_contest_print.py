"""The contest score's terminal lines: every character of the reason, and what the baseline's
measurement says it did."""

from __future__ import annotations

import io

from rich.console import Console

from fib_core.baselines.catalog import INSTALL_HINT
from fib_core.baselines.contest import ContestScore, print_contest_score


def _printed(shard: dict, reason: str = "the baseline passed none of this run's workloads") -> str:
    """What a run prints for a score with ``reason`` and one shard's baseline figures."""
    score = ContestScore(definition="gdn_prefill_qk4_v8_d128_k_last",
                         baseline="flashinfer_wrapper_123ca6", reason=reason)
    out = io.StringIO()
    print_contest_score(score, [type("Shard", (), {"baseline": shard})()],
                        Console(file=out, width=300, color_system=None))
    return out.getvalue()


def test_an_install_hint_in_brackets_survives_the_terminal():
    """rich reads "[baseline]" as a style tag; the printed line must still show it."""
    printed = _printed({"notes": ["kept in [cache]"], "measured": 0},
                       reason=f"flashinfer is not installed: {INSTALL_HINT}")
    assert '.[baseline]"' in printed
    assert "note: kept in [cache]" in printed


def test_the_timed_line_says_kept_only_when_the_cache_took_something():
    assert "timed on 2 workload(s) now; kept for the next runs" in _printed(
        {"measured": 2, "kept": 2})
    alone = _printed({"measured": 2, "kept": 0})
    assert "timed on 2 workload(s) now\n" in alone and "kept" not in alone
    assert "timed on" not in _printed({"measured": 0, "kept": 0})
