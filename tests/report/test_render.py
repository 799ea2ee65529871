"""render_results / progress_bar: what a contestant reads, in a terminal and in a CI log."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from fib_core.report.formats import fmt_ms
from fib_core.report.render import progress_bar, render_results
from fib_core.report.results import CPU_SMOKE_MODE
from fib_core.report.workload_result import Achieved


def log_console(width: int = 80) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width), buf


def sample_run(mkrow, mkrun, **kw: Any):
    return mkrun([
        mkrow("aaaaaaaa-0001", latency=0.0072, speedup=3.0, axes={"batch_size": 1},
              roofline_fraction=0.42, achieved=Achieved(1500.0, "GB/s")),
        mkrow("bbbbbbbb-0002", latency=1.5, speedup=1.0, axes={"batch_size": 64}),
        mkrow("cccccccc-0003", "RUNTIME_ERROR", axes={"batch_size": 8},
              reason="RuntimeError: CUDA error: an illegal memory access was encountered",
              log_tail=["Traceback (most recent call last):", "RuntimeError: CUDA error"]),
    ], **kw)


def test_table_failures_and_summary_in_a_log(mkrow, mkrun):
    console, buf = log_console()
    summary = render_results(sample_run(mkrow, mkrun), console)
    out = buf.getvalue()
    assert summary.score == 0.0 and summary.passed == 2
    lines = out.splitlines()
    table = [ln for ln in lines if ln.startswith("|")]
    assert len(table) == 5  # header + 3 rows + separator
    assert all(len(ln) == len(table[0]) <= 160 for ln in table)
    row1 = next(ln for ln in table if "aaaaaaaa" in ln)
    for cell in ("batch_size=1", "PASSED", "7.20 us", "21.60 us", "3.00x", "1.0e-03", "42% (1500.0 GB/s)"):
        assert cell in row1
    assert "1.500 ms" in out and "RUNTIME_ERROR" in out
    assert "cccccccc (batch_size=8) RUNTIME_ERROR: RuntimeError: CUDA error: an illegal memory" in out
    assert "      | Traceback (most recent call last):" in out
    assert "Score: 0 (1 of 3 workloads failed" in out and "mean speedup of the passing ones: 2.00x" in out
    assert "Passed: 2/3" in out
    assert "Slowest: bbbbbbbb (batch_size=64) 1.500 ms, aaaaaaaa (batch_size=1) 7.20 us" in out


def test_log_output_is_plain_ascii_boxes_without_colour(mkrow, mkrun):
    console, buf = log_console()
    render_results(sample_run(mkrow, mkrun), console)
    out = buf.getvalue()
    assert "\x1b[" not in out
    assert not set(out) & set("─│┃━┏┓┗┛╭╮╰╯┌┐└┘├┤┬┴┼")
    assert console.width == 80  # the caller's console is restored


def test_all_passed_score_is_mean_speedup(mkrow, mkrun):
    console, buf = log_console()
    run = mkrun([mkrow("a", speedup=1.5), mkrow("b", speedup=2.5)])
    assert render_results(run, console).score == 2.0
    out = buf.getvalue()
    assert "Score: 2.00x (mean speedup over the reference, 2 workloads; not the contest score" \
        in out and "Failures" not in out


def test_cpu_smoke_label_is_prominent(mkrow, mkrun):
    console, buf = log_console()
    render_results(sample_run(mkrow, mkrun, device="cpu", gpu_name=None), console)
    out = buf.getvalue()
    assert out.count(CPU_SMOKE_MODE) == 2  # a banner above the table and again under the score
    assert out.index(CPU_SMOKE_MODE) < out.index("aaaaaaaa")
    gpu_console, gpu_buf = log_console()
    render_results(sample_run(mkrow, mkrun), gpu_console)
    assert "CPU smoke" not in gpu_buf.getvalue()


def test_compare_column_and_counts(mkrow, mkrun):
    console, buf = log_console()
    previous = mkrun([mkrow("aaaaaaaa-0001", latency=0.0090), mkrow("zzzzzzzz-0009")])
    render_results(sample_run(mkrow, mkrun), console, compare=previous)
    out = buf.getvalue()
    assert "vs prev" in out and "-20.0%" in out
    assert "Compared with previous: 1 faster, 2 new, 1 missing" in out
    assert "zzzzzzzz was in the previous run but not in this one" in out


def test_terminal_output_has_colour(mkrow, mkrun):
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=200)
    render_results(sample_run(mkrow, mkrun), console)
    assert "\x1b[" in buf.getvalue()


def test_fmt_ms_units():
    assert [fmt_ms(x) for x in (None, 0.00721, 0.1043, 1.5321, 250.0, 1804.4)] == [
        "-", "7.21 us", "104.3 us", "1.532 ms", "250.0 ms", "1.80 s"]


@dataclass
class _W:
    uuid: str


@dataclass
class _E:
    status: str


@dataclass
class _T:
    definition: str
    workload: _W
    evaluation: _E
    solution: str = "sol"


@dataclass
class _Finished:
    trace: _T


@dataclass
class _Log:
    message: str
    level: str = "info"


def test_progress_lines_in_a_log():
    console, buf = log_console(width=30)  # long lines must not be folded in a log
    with progress_bar(3, console) as on_event:
        on_event(_Finished(_T("gdn", _W("u1234567890"), _E("PASSED"))))
        on_event(_Log("phase change"))  # info: not printed
        on_event(_Log("worker restarted", "warning"))
        on_event(_Finished(_T("gdn", _W("u2234567890"), _E("TIMEOUT"))))
        on_event(object())  # unknown events are ignored
    lines = buf.getvalue().splitlines()
    assert lines == [
        "[1/3] PASSED              gdn sol u1234567",
        "warning: worker restarted",
        "[2/3] TIMEOUT             gdn sol u2234567",
    ]


def test_progress_bar_on_a_terminal_counts():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with progress_bar(2, console) as on_event:
        on_event(_Finished(_T("gdn", _W("u1"), _E("PASSED"))))
        on_event(_Finished(_T("gdn", _W("u2"), _E("INCORRECT_SHAPE"))))
    out = buf.getvalue()
    assert "2/2" in out and "1 passed" in out and "1 failed" in out


def test_notes_name_timing_method_and_count_warnings(mkrow, mkrun):
    console, buf = log_console()
    run = mkrun([
        mkrow("a", timing_method="events", warnings=["CUDA events include launch overhead"]),
        mkrow("b", timing_method="events", warnings=["CUDA events include launch overhead"]),
        mkrow("c", timing_method="cupti"),
    ])
    render_results(run, console)
    out = buf.getvalue()
    assert "timing: cupti, events" in out
    assert "note: CUDA events include launch overhead (2 of 3 workloads)" in out


def test_progress_understands_the_engines_events():
    from fib_core.bench.events import Log, SolutionStarted, WorkloadSkipped, WorkloadStarted

    console, buf = log_console()
    with progress_bar(2, console) as on_event:
        on_event(SolutionStarted("sol", "gdn", 2))
        on_event(WorkloadSkipped("u1234567890", "sol", 0, 2))
        on_event(WorkloadStarted("u2234567890", 1, 2, "sol"))  # started is not done
        on_event(Log("sol: building", "debug"))
        on_event(Log("starting a new worker (the previous one ended)", "warning"))
    assert buf.getvalue().splitlines() == [
        "[1/2] skipped (already measured) u1234567",
        "warning: starting a new worker (the previous one ended)",
    ]


def test_progress_total_learnt_from_solution_events():
    from fib_core.bench.events import SolutionStarted

    console, buf = log_console()
    with progress_bar(console) as on_event:  # no total given: the run announces it
        on_event(SolutionStarted("sol", "gdn", 2))
        on_event(_Finished(_T("gdn", _W("u1234567890"), _E("PASSED"))))
        on_event(SolutionStarted("other", "gdn", 1))
        on_event(_Finished(_T("gdn", _W("u2234567890"), _E("PASSED"))))
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("[1/2] PASSED") and lines[1].startswith("[2/3] PASSED")
    buf2 = io.StringIO()
    term = Console(file=buf2, force_terminal=True, width=120)
    with progress_bar(console=term) as on_event:
        on_event(SolutionStarted("sol", "gdn", 1))
        on_event(_Finished(_T("gdn", _W("u1"), _E("PASSED"))))
    assert "1/1" in buf2.getvalue()


def test_a_long_failure_reason_is_printed_once_and_whole(mkrow, mkrun):
    """The checker's line is longer than the reason kept in the row ("..."): the failures list
    shows the whole line once, never split by rich inside an index list."""
    full = ("input set 1: output 'output': 17 of 1024 elements (1.66%) exceed atol=0.01 and "
            "rtol=0.01 (matched 0.983398, required 1); first at [0, 0, 0, 61], [0, 0, 4, 34], "
            "[0, 0, 4, 40], [0, 0, 4, 45], [0, 0, 4, 74]; worst |err| 0.01514 at [0, 0, 4, 34]")
    row = mkrow("dddddddd-0004", "INCORRECT_NUMERICAL", axes={"batch_size": 1},
                reason=full[:150] + "...", log_tail=[full])
    for width in (80, 200):
        console, buf = log_console(width)
        render_results(mkrun([row]), console)
        out = buf.getvalue()
        assert out.count("17 of 1024 elements") == 1
        assert f"dddddddd (batch_size=1) INCORRECT_NUMERICAL: {full}\n" in out
