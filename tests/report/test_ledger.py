"""The run ledger: crash-safe appends, reading back, picking a run, what changed, git state."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

from fib_core.data.json_io import TruncatedRecordWarning
from fib_core.report.history import history_rows
from fib_core.report.ledger import (
    LedgerError,
    append_record,
    config_diff,
    describe_changes,
    git_state,
    is_ledger_ref,
    load_ledger,
    select_run,
)

GDN = "gdn_decode_qk4_v8_d128_k_last"


def test_record_round_trips_with_spread_config_and_git(tmp_path: Path, mkrecord) -> None:
    path = tmp_path / "runs" / "ledger.jsonl"
    rec = mkrecord(
        {1: 0.010, 64: 0.200},
        failed={256: "12 elements outside atol"},
        commit="c" * 40,
        dirty=True,
        config={"engine": {"iterations": 7}},
    )
    append_record(path, rec)
    [back] = load_ledger(path)
    assert back.run_id == rec.run_id
    assert back.git.commit == "c" * 40 and back.git.dirty is True
    assert back.config == {"engine": {"iterations": 7}}
    assert back.solution_hash == rec.solution_hash
    row = back.results.row("wl-b64")
    assert row.latency_ms == pytest.approx(0.200)
    assert row.spread.p10_ms == pytest.approx(0.196) and row.spread.p90_ms == pytest.approx(0.204)
    assert back.results.row("wl-b256").reason == "12 elements outside atol"
    assert (back.passed, back.total, back.score) == (2, 3, 0.0)  # a failure scores 0


def test_a_crash_cut_record_is_skipped_and_later_appends_survive(tmp_path: Path, mkrecord) -> None:
    path = tmp_path / "ledger.jsonl"
    first = mkrecord({1: 0.01}, solution_hash="1" * 64)
    append_record(path, first)
    with path.open("a", encoding="utf-8") as fh:  # a writer killed mid-record
        fh.write('{"format": "fib_core.ledger", "version": 1, "run_id": "cut')
    second = mkrecord({1: 0.02}, solution_hash="2" * 64)
    append_record(path, second)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = load_ledger(path)
    assert [r.solution_hash for r in runs] == ["1" * 64, "2" * 64]
    assert any(issubclass(w.category, TruncatedRecordWarning) for w in caught)


def test_the_scripts_print_the_skipped_record_as_one_line(tmp_path: Path, mkrecord) -> None:
    import os
    import sys

    repo = Path(__file__).resolve().parents[2]
    ledger = tmp_path / "runs" / "ledger.jsonl"
    ledger.parent.mkdir()
    append_record(ledger, mkrecord({1: 0.01}))
    with ledger.open("a", encoding="utf-8") as fh:
        fh.write('{"format": "fib_core.ledger", "version": 1, "run_id": "cut')
    proc = subprocess.run([sys.executable, str(repo / "scripts" / "history.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(repo)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "warning: runs/ledger.jsonl:2: skipped an incomplete record (an interrupted write?)"
    ]


def test_a_foreign_line_is_an_error_naming_file_and_line(tmp_path: Path, mkrecord) -> None:
    path = tmp_path / "ledger.jsonl"
    append_record(path, mkrecord({1: 0.01}))
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"something": "else"}\n')
    with pytest.raises(LedgerError, match=r"ledger\.jsonl:2: not a ledger record"):
        load_ledger(path)


def test_missing_ledger_is_empty(tmp_path: Path) -> None:
    assert load_ledger(tmp_path / "nothing.jsonl") == []


def test_select_last_best_and_commit_prefix(mkrecord) -> None:
    # speedup is 3.0 everywhere; the failing run scores 0, so "best" is the newest of the others
    a = mkrecord({1: 0.010}, commit="aaaa" + "0" * 36, solution_hash="a" * 64)
    b = mkrecord({1: 0.008}, commit="bbbb" + "0" * 36, solution_hash="b" * 64)
    c = mkrecord({1: 0.009}, failed={4: "bad"}, commit="cccc" + "0" * 36, solution_hash="c" * 64)
    other = mkrecord({1: 0.001}, commit="dddd" + "0" * 36)
    other.results.definition = "some_other_definition"
    runs = [a, b, c, other]
    assert select_run(runs, "last", definition=GDN) is c
    assert select_run(runs, "best", definition=GDN) is b
    assert select_run(runs, "aaaa", definition=GDN) is a
    assert select_run(runs, "BBBB0", definition=GDN) is b
    assert select_run(runs, a.run_id, definition=GDN) is a  # ids end in the hash: unique here
    with pytest.raises(LedgerError, match="'ffff'"):
        select_run(runs, "ffff", definition=GDN)
    with pytest.raises(LedgerError, match="no recorded run of .* on cpu"):
        select_run(runs, "last", definition=GDN, device="cpu")


def test_best_prefers_the_highest_score(mkrecord) -> None:
    slow = mkrecord({1: 0.010})
    fast = mkrecord({1: 0.005})
    fast.results.rows[0].speedup = 6.0
    assert select_run([fast, slow], "best", definition=GDN) is fast
    assert fast.score == pytest.approx(6.0) and slow.score == pytest.approx(3.0)


def test_ledger_refs_are_told_from_file_names() -> None:
    assert is_ledger_ref("last") and is_ledger_ref("best") and is_ledger_ref("3fa9c1e")
    assert is_ledger_ref("20261122T150102Z-ab12cd")
    assert not is_ledger_ref("run.json") and not is_ledger_ref("abc")


def test_changes_name_hash_commit_and_settings(mkrecord) -> None:
    old = mkrecord(
        {1: 0.01},
        commit="a" * 40,
        solution_hash="1" * 64,
        config={"engine": {"iterations": 50}, "filters": None},
    )
    new = mkrecord(
        {1: 0.01},
        commit="b" * 40,
        solution_hash="2" * 64,
        config={"engine": {"iterations": 100}, "filters": ["batch_size=1"]},
    )
    changes = describe_changes(old, new)
    assert "solution 11111111→22222222" in changes
    assert "commit aaaaaaa→bbbbbbb" in changes
    assert "engine.iterations 50→100" in changes
    assert "filters default→batch_size=1" in changes
    assert describe_changes(None, new) == ["first run"]
    same = mkrecord(
        {1: 0.01},
        commit="b" * 40,
        solution_hash="2" * 64,
        dirty=True,
        config={"engine": {"iterations": 100}, "filters": ["batch_size=1"]},
    )
    assert describe_changes(new, same) == ["now dirty"]
    assert config_diff({"a": 1}, {"a": 1}) == []


def test_history_marks_best_and_compares_within_a_definition(mkrecord) -> None:
    a = mkrecord({1: 0.01}, solution_hash="1" * 64)
    b = mkrecord({1: 0.01}, solution_hash="2" * 64)
    b.results.rows[0].speedup = 5.0
    c = mkrecord({1: 0.01}, solution_hash="3" * 64)
    rows = history_rows([a, b, c])
    assert [r.index for r in rows] == [1, 2, 3]
    assert [r.is_best for r in rows] == [False, True, False]
    assert rows[2].changes == ["solution 22222222→33333333"]


def test_compare_best_never_picks_a_cpu_smoke_run(mkrecord) -> None:
    cpu = mkrecord({1: 5.0}, solution_hash="1" * 64, device="cpu")
    with pytest.raises(LedgerError, match="no scored run .* yet, so no best"):
        select_run([cpu], "best", definition=GDN)
    gpu = mkrecord({1: 0.01}, solution_hash="2" * 64)
    cpu.results.rows[0].speedup = 50.0  # whatever a CPU row says, it is not a score
    assert select_run([gpu, cpu], "best", definition=GDN) is gpu
    assert cpu.score_label == "-" and gpu.score_label == "3.00x"


def test_a_cpu_smoke_run_is_never_the_best_and_shows_no_score(mkrecord) -> None:
    from rich.console import Console

    from fib_core.report.history import render_history

    cpu = mkrecord({1: 5.0}, solution_hash="1" * 64, device="cpu")
    cpu_again = mkrecord({1: 4.0}, solution_hash="2" * 64, device="cpu")
    rows = history_rows([cpu, cpu_again])
    assert [r.is_best for r in rows] == [False, False]
    console = Console(record=True, width=200)
    render_history(rows, console)
    text = console.export_text()
    assert "0.00x" not in text and "3.00x" not in text and " - " in text


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_state_reads_commit_and_dirty_flag(tmp_path: Path) -> None:
    assert git_state(tmp_path).commit is None  # not a repository: no figures, no error

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tmp_path), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q")
    (tmp_path / "kernel.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("runs/\n")
    git("add", "-A")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "one")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "ledger.jsonl").write_text("{}\n")  # ignored: still clean
    state = git_state(tmp_path)
    assert state.commit == git("rev-parse", "HEAD") and state.dirty is False
    (tmp_path / "kernel.py").write_text("x = 2\n")
    assert git_state(tmp_path).dirty is True
    assert git_state(tmp_path).label() == state.commit[:7] + "+dirty"


def test_the_quick_subset_reads_as_the_workloads_that_ran(mkrecord) -> None:
    """A CPU run without named workloads runs the quick subset unasked: history says which
    workloads ran, never 'quick True→False' for someone who never passed --quick."""
    smoke = mkrecord({1: 5.0}, device="cpu", config={"quick": True, "filters": None})
    gpu = mkrecord({1: 0.01}, config={"quick": False, "filters": None})
    named = mkrecord({1: 5.0}, device="cpu", config={"quick": False, "filters": ["batch_size=1"]})
    assert describe_changes(smoke, gpu) == [
        "workloads quick subset→every workload", "machine cpu→NVIDIA H100 80GB HBM3"]
    assert describe_changes(smoke, named) == ["filters default→batch_size=1"]
    text = " ".join(describe_changes(smoke, gpu) + describe_changes(smoke, named))
    assert "True" not in text and "False" not in text


def test_report_best_on_cpu_only_history_says_why(mkrecord) -> None:
    from fib_core.report.report_sections import sections_for

    decode = mkrecord({1: 5.0}, device="cpu")
    prefill = mkrecord({1: 5.0}, device="cpu")
    prefill.results.definition = "gdn_prefill_qk4_v8_d128_k_last"
    with pytest.raises(LedgerError, match="no scored run of .* so no best .*CPU smoke run"):
        sections_for([decode, prefill], run="best")
