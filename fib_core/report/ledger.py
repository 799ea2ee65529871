"""The run ledger: one JSON line per benchmark run, appended to ``runs/ledger.jsonl`` of the fork.

A contestant iterates for weeks; the ledger keeps what each run measured and what it measured:
which solution (content hash), which commit of the fork (and whether the tree had uncommitted
changes), the engine settings, the machine, and every workload's figures with their spread.
``run_local.py --compare last|best|<commit>`` and ``scripts/history.py`` read it back.

Appends go through :func:`fib_core.data.json_io.append_jsonl` (one write, fsynced, a crash-cut
line never swallows the next record) and reads through ``iter_jsonl``, which skips a record cut
short by a crash with a warning.

Example::

    from fib_core.report.ledger import load_ledger, select_run
    runs = load_ledger("runs/ledger.jsonl")
    best = select_run(runs, "best", definition="gdn_decode_qk4_v8_d128_k_last")
    print(best.run_id, best.score, best.git_commit)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fib_core.data.json_io import append_jsonl, iter_jsonl
from fib_core.errors import FibError
from fib_core.gitcmd import GitError
from fib_core.gitcmd import git as run_git
from fib_core.report.results import ResultsFileError, RunResults, check_format_tag
from fib_core.report.summary import summarize

LEDGER_FORMAT = "fib_core.ledger"
LEDGER_VERSION = 1
LEDGER_RELPATH = Path("runs") / "ledger.jsonl"
KEYWORDS = ("last", "best")
_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")
_GIT_TIMEOUT_S = 10


class LedgerError(FibError):
    """The ledger is unreadable, or holds no run matching what was asked for."""


@dataclass(frozen=True)
class GitState:
    """Where the fork's tree stood: commit (None outside git) and uncommitted changes."""

    commit: str | None = None
    dirty: bool | None = None
    branch: str | None = None

    def label(self) -> str:
        """``abc1234`` or ``abc1234+dirty``; ``no git`` outside a repository."""
        if not self.commit:
            return "no git"
        return self.commit[:7] + ("+dirty" if self.dirty else "")

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "dirty": self.dirty, "branch": self.branch}


def git_state(root: str | Path) -> GitState:
    """The commit, dirty flag and branch of the git work tree holding ``root``; never raises.

    Dirty means tracked changes or untracked files git does not ignore (a new source file in
    ``solution/`` counts; ``runs/`` is ignored and does not).
    """

    def git(*args: str) -> str | None:
        try:
            return run_git(Path(root), *args, timeout_s=_GIT_TIMEOUT_S)
        except GitError:
            return None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return GitState()
    status = git("status", "--porcelain")
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    return GitState(
        commit=commit,
        dirty=bool(status) if status is not None else None,
        branch=branch if branch and branch != "HEAD" else None,
    )


@dataclass
class LedgerRecord:
    """One run as the ledger keeps it.

    ``config`` holds the settings that decide what was measured (engine settings, workload
    filters, quick flag, build options, requested device); ``results`` every workload row with
    its spread; ``cross_check`` the timer cross-check rows when the run had one.
    """

    run_id: str
    created: str
    solution_name: str | None
    solution_hash: str | None
    git: GitState
    config: dict[str, Any]
    results: RunResults
    cross_check: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ValueError(f"LedgerRecord.run_id: found {self.run_id!r}, expected a string")
        if not isinstance(self.config, dict):
            raise ValueError(f"LedgerRecord.config: found {self.config!r}, expected a dict")
        if not isinstance(self.results, RunResults):
            raise ValueError("LedgerRecord.results: expected RunResults")

    @property
    def definition(self) -> str:
        return self.results.definition

    @property
    def device(self) -> str:
        return self.results.device

    @property
    def git_commit(self) -> str | None:
        return self.git.commit

    @property
    def score(self) -> float:
        """The contest score of this run (mean speedup; 0 when any workload failed)."""
        return summarize(self.results).score

    @property
    def has_score(self) -> bool:
        """Whether the run can be scored (not a CPU smoke run; the reference was timed)."""
        return summarize(self.results).has_score

    @property
    def score_label(self) -> str:
        """The score as reports show it: "3.10x", or "-" when the run has none (a CPU smoke
        run: its reference is not timed; a 0.00x would read as a failure)."""
        summary = summarize(self.results)  # once: score and has_score both come from it
        return f"{summary.score:.2f}x" if summary.has_score else "-"

    @property
    def passed(self) -> int:
        return sum(1 for r in self.results.rows if r.passed)

    @property
    def total(self) -> int:
        return len(self.results.rows)

    def to_dict(self) -> dict[str, Any]:
        summary = summarize(self.results)
        return {
            "format": LEDGER_FORMAT,
            "version": LEDGER_VERSION,
            "run_id": self.run_id,
            "created": self.created,
            "definition": self.definition,
            "solution": {"name": self.solution_name, "hash": self.solution_hash},
            "git": self.git.to_dict(),
            "config": self.config,
            "environment": {
                "device": self.results.device,
                "gpu_name": self.results.gpu_name,
                **self.results.environment,
            },
            "summary": {
                "score": summary.score,
                "passed": summary.passed,
                "total": summary.total,
                "mean_speedup_passed": summary.mean_speedup_passed,
            },
            "results": self.results.to_dict(),
            "cross_check": list(self.cross_check),
        }

    @classmethod
    def from_dict(cls, d: Any, *, source: str = "ledger") -> LedgerRecord:
        """Rebuild a record; raises :class:`LedgerError` naming ``source`` when malformed."""
        check_format_tag(
            d,
            source,
            LedgerError,
            "ledger record",
            (LEDGER_FORMAT, LEDGER_VERSION),
            (
                "delete that line or move the file aside",
                "move the file aside to start a new ledger",
            ),
        )
        try:
            git = d.get("git") or {}
            sol = d.get("solution") or {}
            return cls(
                run_id=d["run_id"],
                created=d.get("created") or "",
                solution_name=sol.get("name"),
                solution_hash=sol.get("hash"),
                git=GitState(git.get("commit"), git.get("dirty"), git.get("branch")),
                config=dict(d.get("config") or {}),
                results=RunResults.from_dict(d["results"], source=source),
                cross_check=list(d.get("cross_check") or []),
            )
        except ResultsFileError as err:
            raise LedgerError(str(err)) from None
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            what = f"missing field {err}" if isinstance(err, KeyError) else str(err).splitlines()[0]
            raise LedgerError(
                f"{source}: malformed ledger record: {what}; delete that line"
            ) from None


def new_record(
    results: RunResults,
    *,
    root: str | Path | None,
    solution_name: str | None = None,
    solution_hash: str | None = None,
    config: dict[str, Any] | None = None,
    cross_check: list[dict[str, Any]] | None = None,
    git: GitState | None = None,
) -> LedgerRecord:
    """A record of ``results`` with the fork's git state (read from ``root`` unless given)."""
    now = datetime.now(UTC)
    state = git if git is not None else (git_state(root) if root is not None else GitState())
    tag = (solution_hash or "")[:6] or "nohash"
    return LedgerRecord(
        run_id=f"{now.strftime('%Y%m%dT%H%M%SZ')}-{tag}",
        created=now.isoformat(timespec="seconds"),
        solution_name=solution_name,
        solution_hash=solution_hash,
        git=state,
        config=dict(config or {}),
        results=results,
        cross_check=list(cross_check or []),
    )


def append_record(path: str | Path, record: LedgerRecord) -> Path:
    """Append one record (crash-safe: one fsynced write, a cut line stays on its own)."""
    path = Path(path)
    append_jsonl(path, [record.to_dict()])
    return path


def load_ledger(path: str | Path) -> list[LedgerRecord]:
    """Every record of the ledger, oldest first; a missing file is an empty ledger.

    A line cut short by a crash is skipped with a warning; any other bad line is an error that
    names the file and line.
    """
    path = Path(path)
    if not path.is_file():
        return []
    return [
        LedgerRecord.from_dict(raw, source=f"{path}:{lineno}") for lineno, raw in iter_jsonl(path)
    ]


def is_ledger_ref(text: str) -> bool:
    """True for ``last``, ``best`` or something shaped like a commit prefix / run id."""
    return text in KEYWORDS or bool(_HEX.match(text)) or bool(re.match(r"^\d{8}T\d{6}Z", text))


def select_run(
    records: list[LedgerRecord],
    ref: str,
    *,
    definition: str,
    device: str | None = None,
    source: str | Path = LEDGER_RELPATH,
) -> LedgerRecord:
    """The run ``ref`` names among ``definition``'s runs (on ``device``'s kind when given).

    ``last``: the newest; ``best``: the highest score (the newest of equals); otherwise a git
    commit prefix or a run id prefix (the newest run that matches). Raises :class:`LedgerError`.
    """
    runs = [r for r in records if r.definition == definition]
    if device is not None:
        runs = [r for r in runs if r.device == device]
    where = f" on {device}" if device else ""
    if not runs:
        raise LedgerError(
            f"{source}: no recorded run of {definition}{where} to compare with; "
            "run once without --compare first"
        )
    if ref == "last":
        return runs[-1]
    if ref == "best":
        scored = [r for r in runs if r.has_score]  # a CPU smoke run has none
        if not scored:
            raise LedgerError(
                f"{source}: no scored run of {definition}{where} yet, so no best (a CPU "
                "smoke run has no score); --compare last compares with the previous run"
            )
        return max(enumerate(scored), key=lambda item: (item[1].score, item[0]))[1]
    low = ref.lower()
    matches = [
        r for r in runs if (r.git_commit or "").lower().startswith(low) or r.run_id.startswith(ref)
    ]
    if not matches:
        raise LedgerError(
            f"{source}: no run of {definition}{where} with commit or run id {ref!r}; "
            "`python scripts/history.py` lists the recorded runs"
        )
    return matches[-1]


def describe_changes(previous: LedgerRecord | None, current: LedgerRecord) -> list[str]:
    """What differs between two runs: solution hash, commit/dirty, config keys, machine."""
    if previous is None:
        return ["first run"]
    out: list[str] = []
    if previous.solution_hash != current.solution_hash:
        out.append(f"solution {_short(previous.solution_hash)}→{_short(current.solution_hash)}")
    if previous.git.commit != current.git.commit:
        out.append(f"commit {previous.git.label()}→{current.git.label()}")
    elif previous.git.dirty != current.git.dirty:
        out.append("now dirty" if current.git.dirty else "now clean")
    out += _settings_changes(previous.config, current.config)
    if previous.results.gpu_name != current.results.gpu_name or previous.device != current.device:
        out.append(
            f"machine {previous.results.gpu_name or previous.device}→"
            f"{current.results.gpu_name or current.device}"
        )
    return out or ["nothing"]


def _settings_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """:func:`config_diff` of two runs' settings, where ``quick`` (whether the quick subset
    ran: asked for with --quick, or a CPU run's default when no workload is named) reads as
    the workloads that ran, and is left out when a change of filters already explains it."""
    out = config_diff({k: v for k, v in old.items() if k != "quick"},
                      {k: v for k, v in new.items() if k != "quick"})
    was, now = bool(old.get("quick")), bool(new.get("quick"))
    if was != now and old.get("filters") == new.get("filters"):
        subset = {True: "quick subset", False: "every workload"}
        out.append(f"workloads {subset[was]}→{subset[now]}")
    return out


def config_diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """``key old→new`` for every setting that differs (nested dicts flattened with dots)."""
    out: list[str] = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        name = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, prefix=f"{name}.")
        elif a != b:
            out.append(f"{name} {_value(a)}→{_value(b)}")
    return out


def _short(h: str | None) -> str:
    return h[:8] if h else "?"


def _value(v: Any) -> str:
    if v is None:
        return "default"
    if isinstance(v, list):
        return ",".join(str(x) for x in v) or "[]"
    return str(v)
