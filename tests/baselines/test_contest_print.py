"""The contest score's terminal line keeps every character of its reason."""

from __future__ import annotations

import io

from rich.console import Console

from fib_core.baselines.catalog import INSTALL_HINT
from fib_core.baselines.contest import ContestScore, print_contest_score


def test_an_install_hint_in_brackets_survives_the_terminal():
    """rich reads "[baseline]" as a style tag; the printed line must still show it."""
    reason = f"flashinfer is not installed: {INSTALL_HINT}"
    score = ContestScore(definition="gdn_prefill_qk4_v8_d128_k_last",
                         baseline="flashinfer_wrapper_123ca6", reason=reason)
    out = io.StringIO()
    shard = {"notes": ["kept in [cache]"], "measured": 0}
    print_contest_score(score, [type("Shard", (), {"baseline": shard})()],
                        Console(file=out, width=300, color_system=None))
    printed = out.getvalue()
    assert '.[baseline]"' in printed
    assert "note: kept in [cache]" in printed
