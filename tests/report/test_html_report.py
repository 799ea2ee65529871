"""The HTML report rendered from recorded runs: plots, every workload, the comparison's values."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.bench.cross_check import NEEDS_GPU, CrossCheckRow, judge
from fib_core.report import plots
from fib_core.report.html import ReportSection, build_html
from fib_core.report.ledger import append_record, load_ledger
from fib_core.report.report_sections import sections_for

GDN = "gdn_decode_qk4_v8_d128_k_last"


def _row_html(page: str, uuid: str) -> str:
    m = re.search(rf'<tr data-uuid="{re.escape(uuid)}"[^>]*>(.*?)</tr>', page, re.S)
    assert m, f"no table row for {uuid}"
    return m.group(1)


def _cells(row_html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row_html, re.S)]


def _head(page: str, cls: str) -> list[str]:
    m = re.search(rf'<table class="{cls}"[^>]*><thead><tr>(.*?)</tr>', page, re.S)
    assert m, f"no table {cls}"
    return [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", m.group(1))]


def _workload(page: str, uuid: str) -> dict[str, str]:
    """The per-workload table's row of ``uuid``, by column name."""
    return dict(zip(_head(page, "workloads sortable"), _cells(_row_html(page, uuid)), strict=True))


@pytest.fixture
def two_runs(mkrecord):
    """Run 1, then run 2: b1 20 % faster, b64 1 % slower (noise), b256 newly failing."""
    prev = mkrecord({1: 0.010, 64: 0.200, 256: 1.000}, solution_hash="1" * 64, commit="a" * 40)
    cur = mkrecord(
        {1: 0.008, 64: 0.202},
        failed={256: "output: 12 of 4096 elements <beyond> atol=0.01"},
        solution_hash="2" * 64,
        commit="b" * 40,
    )
    return prev, cur


@pytest.mark.skipif(not plots.plots_available(), reason="matplotlib is not installed")
def test_report_has_plots_every_workload_and_the_right_comparison(two_runs) -> None:
    prev, cur = two_runs
    page = build_html([ReportSection(cur, previous=prev, history=[prev, cur])])
    kinds = re.findall(r'data-plot="([a-z-]+)"><svg', page)
    assert kinds == ["latency", "speedup", "roofline", "overlay", "history"]
    for uuid in ("wl-b1", "wl-b64", "wl-b256"):
        _row_html(page, uuid)
    b1 = _workload(page, "wl-b1")
    assert (b1["status"], b1["latency"], b1["vs reference"], b1["% roofline"]) == (
        "PASSED", "8.00 us", "3.00x", "50.0%")
    assert (b1["p10-p90"], b1["roofline floor"], b1["max rel err"]) == (
        "4.0%", "4.00 us", "2.0e-03")
    assert 'title="p10-p90: 7.84-8.16 us"' in _row_html(page, "wl-b1")
    delta = ["previous", "change", "noise", "verdict"]
    assert [b1[k] for k in delta] == ["10.00 us", "-20.0%", "±4.0%", "faster"]
    b64 = _workload(page, "wl-b64")
    assert [b64[k] for k in delta] == ["200.0 us", "+1.0%", "±4.0%", "within noise"]
    b256 = _workload(page, "wl-b256")
    assert b256["status"] == "INCORRECT_NUMERICAL" and b256["verdict"] == "now failing"
    summary = re.search(r'id="s0-compared">(.*?)</p>', page, re.S).group(1)
    assert "score 3.00x (vs reference)" in summary
    assert "1 faster, 1 within noise, 1 now failing" in summary
    assert "commit aaaaaaa" in summary
    # failures with their reasons, escaped; the environment; nothing fetched from the network
    assert "output: 12 of 4096 elements &lt;beyond&gt; atol=0.01" in page
    assert "<beyond>" not in page
    assert "Score 0 (1 of 3 workloads failed)" in page
    assert "2.8.0" in page and "NVIDIA H100 80GB HBM3" in page
    # one inline script, nothing fetched, and a policy that forbids fetching anything
    assert len(re.findall(r"<script\b", page)) == 1 and "<script>" in page
    assert not re.search(r"<(link|img|iframe)\b", page)
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert 'http-equiv="Content-Security-Policy" content="default-src &#x27;none&#x27;' in page


def test_history_lists_each_run_with_score_and_changes(mkrecord) -> None:
    a = mkrecord({1: 0.010}, solution_hash="1" * 64, commit="a" * 40)
    b = mkrecord(
        {1: 0.010}, solution_hash="2" * 64, commit="a" * 40, config={"engine": {"iterations": 100}}
    )
    b.results.rows[0].speedup = 4.5
    page = build_html([ReportSection(b, history=[a, b])])
    table = re.search(r'<table class="history">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    rows = [_cells(r) for r in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
    assert _head(page, "history")[5] == "score (vs reference)"
    assert [r[5] for r in rows] == ["3.00x", "4.50x (best)"]
    assert rows[1][7] == "solution 11111111→22222222; engine.iterations 50→100"
    assert rows[0][3] == "aaaaaaa"  # the commit, beside the time (UTC)


def test_a_cpu_smoke_run_has_no_score_on_the_page_or_in_its_history(mkrecord) -> None:
    gpu = mkrecord({1: 0.010}, solution_hash="1" * 64)
    cpu = mkrecord({1: 5.0}, solution_hash="2" * 64, device="cpu")
    for row in cpu.results.rows:  # as a CPU smoke run records them: the reference not timed
        row.speedup = row.reference_latency_ms = None
    page = build_html([ReportSection(cpu, history=[gpu, cpu])])
    assert "No score: CPU smoke run, correctness only" in page and "0.00x" not in page
    table = re.search(r'<table class="history">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    rows = [_cells(r) for r in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
    assert [r[5] for r in rows] == ["3.00x (best)", "-"]


def test_a_gpu_run_without_reference_timing_has_no_score_either(mkrecord) -> None:
    from rich.console import Console

    from fib_core.report.render import render_results

    run = mkrecord({1: 0.010})
    run.results.rows[0].speedup = run.results.rows[0].reference_latency_ms = None
    assert not run.has_score and run.score_label == "-"
    assert "No score: the reference was not timed" in build_html([ReportSection(run)])
    console = Console(record=True, width=200)
    render_results(run.results, console)
    text = console.export_text()
    assert "No score: the reference was not timed" in text and "Score: 0.00x" not in text


def test_without_matplotlib_tables_remain_and_the_page_says_why(
    two_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plots, "plots_available", lambda: False)
    prev, cur = two_runs
    page = build_html([ReportSection(cur, previous=prev, history=[prev, cur])])
    assert "<svg" not in page
    assert "pip install -e &quot;.[plot]&quot;" in page
    b1 = _workload(page, "wl-b1")
    assert [b1[k] for k in ("previous", "change", "noise", "verdict")] == [
        "10.00 us", "-20.0%", "±4.0%", "faster"]


def test_cross_check_rows_and_the_cpu_note_are_shown(mkrecord) -> None:
    lat = {"profiler": 0.005, "events": 0.050, "graph": 0.006}
    ref, flagged, reason = judge(lat, 1)
    row = CrossCheckRow(
        "wl-b1",
        {"batch_size": 1},
        lat,
        {"cupti": "cupti-python is not installed"},
        1,
        ref,
        flagged,
        reason,
    )
    gpu = mkrecord({1: 0.005}, config={"cross_check": True}, cross_check=[row.to_dict()])
    page = build_html([ReportSection(gpu)])
    table = re.search(r'<table class="cross-check">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    cells = _cells(re.findall(r"<tr>(.*?)</tr>", table, re.S)[0])
    # workload axes kernels busy profiler cupti events graph verdict
    assert cells[3] == "-" and cells[4] == "5.00 us" and cells[5] == "n/a"
    assert cells[6] == "50.00 us (10.00x)" and cells[7] == "6.00 us (1.20x)"
    assert cells[8].startswith("DISAGREE: events reads 50.0 us")
    cpu = mkrecord({1: 5.0}, device="cpu", config={"cross_check": True})
    assert NEEDS_GPU in build_html([ReportSection(cpu)])


def test_sections_default_to_the_run_before_on_the_same_device(mkrecord) -> None:
    a = mkrecord({1: 0.010}, solution_hash="1" * 64)
    cpu = mkrecord({1: 5.0}, solution_hash="2" * 64, device="cpu")
    b = mkrecord({1: 0.008}, solution_hash="3" * 64)
    [sec] = sections_for([a, cpu, b])
    assert sec.record is b and sec.previous is a
    [sec] = sections_for([a, cpu, b], run="best", compare="none")
    assert sec.record is b and sec.previous is None  # equal scores: the newest is best


def test_run_recording_appends_and_writes_the_page(tmp_path: Path, mkrecord) -> None:
    from rich.console import Console

    from fib_core.project.recording import RunRecording

    ledger = tmp_path / "runs" / "ledger.jsonl"
    first = mkrecord({1: 0.010, 4: 0.020})
    append_record(ledger, first)
    rec = RunRecording(
        root=tmp_path,
        solution_name="s",
        solution_hash="9" * 64,
        config={"quick": True},
        ledger_path=ledger,
        compare_ref="last",
        html_path=tmp_path / "out" / "r.html",
    )
    rec.check(GDN)
    current = mkrecord({1: 0.005, 4: 0.020}).results
    assert rec.previous(current).rows == first.results.rows
    assert rec.compared_with.run_id == first.run_id
    out = io.StringIO()
    rec.keep(current, Console(file=out, width=200))
    runs = load_ledger(ledger)
    assert (
        len(runs) == 2 and runs[1].solution_hash == "9" * 64 and runs[1].config == {"quick": True}
    )
    text = out.getvalue()
    assert f"compared with run {first.run_id}" in text and str(ledger) in text
    page = (tmp_path / "out" / "r.html").read_text()
    b1 = _workload(page, "wl-b1")
    assert [b1[k] for k in ("previous", "change", "noise")] == ["10.00 us", "-50.0%", "±4.0%"]


def _script(repo_root: Path, name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(repo_root), COLUMNS="200")
    return subprocess.run(
        [sys.executable, str(repo_root / "scripts" / name), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_scripts_report_and_history(repo_root: Path, tmp_path: Path, two_runs) -> None:
    missing = _script(repo_root, "report.py", cwd=tmp_path)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "run scripts/run_local.py first" in missing.stderr
    prev, cur = two_runs
    for rec in (prev, cur):
        append_record(tmp_path / "runs" / "ledger.jsonl", rec)
    done = _script(repo_root, "report.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "runs" / "report.html").read_text()
    assert _workload(page, "wl-b1")["verdict"] == "faster"
    hist = _script(repo_root, "history.py", cwd=tmp_path)
    assert hist.returncode == 0, hist.stderr
    assert prev.run_id in hist.stdout and cur.run_id in hist.stdout
    assert "3.00x *" in hist.stdout and "2/3" in hist.stdout
    bad = _script(repo_root, "report.py", "--run", "ffff", cwd=tmp_path)
    assert bad.returncode == 2 and "'ffff'" in bad.stderr


def test_an_unwritable_ledger_or_page_is_reported_not_raised(tmp_path: Path, mkrecord) -> None:
    from rich.console import Console

    from fib_core.project.recording import RunRecording

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where a folder should be\n")
    rec = RunRecording(
        root=tmp_path,
        solution_name="s",
        solution_hash="9" * 64,
        config={},
        ledger_path=blocker / "ledger.jsonl",
        html_path=blocker / "r.html",
    )
    problems = rec.keep(mkrecord({1: 0.01}).results, Console(file=io.StringIO()))
    assert len(problems) == 2
    assert problems[0].startswith(f"{blocker / 'ledger.jsonl'}: cannot record the run")
    assert problems[1].startswith(f"{blocker / 'r.html'}: cannot write the HTML report")
    assert rec.recorded is None


@pytest.mark.skipif(not plots.plots_available(), reason="matplotlib is not installed")
def test_history_plot_labels_time_and_commit_and_shades_repeated_runs(mkrecord) -> None:
    runs = [mkrecord({1: ms}, solution_hash=h * 64, commit=h * 40) for ms, h in
            ((0.010, "1"), (0.008, "2"), (0.0081, "2"))]
    for k, rec in enumerate(runs):
        rec.created = f"2026-03-0{k + 1}T09:3{k}:00+00:00"
    svg = re.search(r'data-plot="history">(<svg.*?</svg>)',
                    build_html([ReportSection(runs[-1], history=runs)]), re.S).group(1)
    texts = [t.strip() for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)]
    assert "03-01 09:30" in " ".join(texts) and "2222222" in " ".join(texts)
    assert "repeated runs of one solution: noise" in texts  # runs 2 and 3: one solution
    assert "speedup over the reference (x)" in texts  # no baseline: the score it plots, named
    assert "0.0" in texts or "0" in texts  # the y-axis starts at 0, not at the lowest score
    once = [mkrecord({1: 0.01}, solution_hash=h * 64) for h in "12"]
    assert "run it again to see the noise band" in build_html([ReportSection(once[1],
                                                                             history=once)])


@pytest.mark.skipif(not plots.plots_available(), reason="matplotlib is not installed")
def test_roofline_plot_is_logarithmic_when_shares_are_far_below_the_limit(mkrecord) -> None:
    """A kernel at 0.6 % of its roofline gets a log axis (ticks down to its share), one at 50 %
    keeps the 0-100 % axis from 0."""
    def roofline_texts(fraction: float) -> list[str]:
        rec = mkrecord({1: 0.05, 8: 0.06})
        for row in rec.results.rows:
            row.roofline_fraction = fraction
        svg = re.search(r'data-plot="roofline">(<svg.*?</svg>)',
                        build_html([ReportSection(rec)]), re.S).group(1)
        return [t.strip() for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)]

    small = roofline_texts(0.006)
    assert "1" in small and "100" in small and "0" not in small  # log: 1, 10, 100; no zero
    half = roofline_texts(0.5)
    assert "0" in half and "100" in half  # linear from 0


@pytest.mark.skipif(not plots.plots_available(), reason="matplotlib is not installed")
def test_a_whole_number_axis_gets_whole_number_ticks(mkrecord) -> None:
    """Shapes 1, 2, 3 (pages, batch sizes) are ticked 1, 2, 3, never 1.25 or 1.5."""
    rec = mkrecord({1: 0.05, 2: 0.06, 3: 0.07})
    for row in rec.results.rows:
        row.roofline_fraction = 0.5
    svg = re.search(r'data-plot="roofline">(<svg.*?</svg>)',
                    build_html([ReportSection(rec)]), re.S).group(1)
    texts = [t.strip() for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)]
    assert {"1", "2", "3"} <= set(texts)
    assert not [t for t in texts if re.fullmatch(r"\d+\.\d+", t)], texts
