"""Which recorded runs a report shows: per definition, the chosen run and its comparison.

Example::

    records = load_ledger("runs/ledger.jsonl")
    page = build_html(sections_for(records, run="best", compare="last"))
"""

from __future__ import annotations

from pathlib import Path

from fib_core.report.html import ReportSection
from fib_core.report.ledger import LEDGER_RELPATH, LedgerError, LedgerRecord, select_run

NO_COMPARE = "none"


def sections_for(
    records: list[LedgerRecord],
    *,
    definition: str | None = None,
    run: str = "last",
    compare: str | None = None,
    source: str | Path = LEDGER_RELPATH,
) -> list[ReportSection]:
    """One section per definition (ledger order), or only ``definition``'s.

    ``run`` picks each section's run (``last``, ``best``, a commit or run-id prefix); a prefix
    that matches no run of a definition leaves that definition out (an error if it matches
    none at all). ``compare`` picks the run to compare with the same way; None means the run
    recorded just before the chosen one on the same kind of device, ``none`` no comparison.
    """
    names = list(dict.fromkeys(r.definition for r in records))
    if definition is not None:
        if definition not in names:
            raise LedgerError(
                f"{source}: no recorded run of {definition}; recorded: {', '.join(names) or 'none'}"
            )
        names = [definition]
    sections = []
    for name in names:
        try:
            chosen = select_run(records, run, definition=name, source=source)
        except LedgerError:
            if len(names) == 1:
                raise
            continue
        same = [r for r in records if r.definition == name]
        sections.append(ReportSection(chosen, _previous(same, chosen, compare, source), same))
    if not sections:
        if run == "best":  # no definition has a scored run: say why, as for one definition
            raise LedgerError(
                f"{source}: no scored run of {', '.join(names)} yet, so no best (a CPU smoke "
                "run has no score; the score needs GPU timings); --run last shows the newest"
            )
        raise LedgerError(f"{source}: no recorded run matches {run!r}")
    return sections


def _previous(
    runs: list[LedgerRecord], chosen: LedgerRecord, compare: str | None, source: str | Path
) -> LedgerRecord | None:
    if compare == NO_COMPARE:
        return None
    if compare is not None:
        other = select_run(runs, compare, definition=chosen.definition, source=source)
        return None if other is chosen else other
    at = next(i for i, r in enumerate(runs) if r is chosen)
    before = [r for r in runs[:at] if r.device == chosen.device]
    return before[-1] if before else None
