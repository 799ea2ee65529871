"""`report summary | best | merge` on a small dataset folder with hand-made traces."""

from __future__ import annotations

import json

from fib_core.cli import main
from fib_core.data.traceset import TraceSet

SHORT = ("aaaa0001", "bbbb0002", "cccc0003")


def table_rows(out: str) -> list[list[str]]:
    rows = []
    for line in out.splitlines():
        if line.startswith("|") and "---" not in line:
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_summary_scores_each_solution(small_dataset, capsys):
    code = main(["report", "summary", "--local", str(small_dataset)])
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert rows[0][:6] == ["definition", "solution", "author", "device", "passed", "score"]
    by_solution = {r[1]: r for r in rows[1:]}
    # fast: speedups 2, 4, 3 (its earlier failure of cccc0003 was superseded) -> score 3
    assert by_solution["fast"][2:8] == ["alice", "NVIDIA H100 80GB HBM3", "3/3", "3.00x", "3.00x", "0"]
    # broken: one failure -> score 0; passing speedups 8 and 6 -> mean 7
    assert by_solution["broken"][2:7] == ["bob", "NVIDIA H100 80GB HBM3", "2/3", "0", "7.00x"]
    assert [r[1] for r in rows[1:]] == ["fast", "broken"]  # best score first
    assert code == 1  # a solution has a failed workload


def test_summary_all_passing_exits_0_and_counts_unrun(tmp_path, dataset_writer, capsys):
    write, trace = dataset_writer
    root = write(tmp_path / "ds", [trace("fast", "aaaa0001-0000-0000-0000-000000000000", 16)])
    assert main(["report", "summary", "--local", str(root)]) == 0
    (header, row) = table_rows(capsys.readouterr().out)
    assert row[header.index("passed")] == "1/1" and row[header.index("not run")] == "2"


def test_visualize_prints_the_summary_table(small_dataset, capsys):
    assert main(["report", "summary", "--local", str(small_dataset)]) == 1
    summary = capsys.readouterr().out
    assert main(["report", "visualize", "--local", str(small_dataset)]) == 1
    assert capsys.readouterr().out == summary


def test_cpu_smoke_rows_have_no_score(tmp_path, dataset_writer, capsys):
    from fib_core.data import Trace

    write, trace = dataset_writer
    record = trace("fast", "aaaa0001-0000-0000-0000-000000000000", 16).to_dict()
    record["evaluation"]["extra"] = {"device": "cpu"}  # a CPU smoke run: the reference not timed
    record["evaluation"]["environment"]["hardware"] = "CPU (x86_64)"
    record["evaluation"]["performance"].update(reference_latency_ms=0.0, speedup_factor=0.0)
    root = write(tmp_path / "ds", [Trace.from_dict(record)])
    assert main(["report", "summary", "--local", str(root)]) == 0
    out = capsys.readouterr().out
    (header, row) = table_rows(out)
    assert row[header.index("device")] == "cpu"
    assert row[header.index("score")] == "-" and row[header.index("mean speedup (passing)")] == "-"
    assert "no score" in out


def test_best_picks_fastest_passing_per_workload(small_dataset, capsys):
    assert main(["report", "best", "--local", str(small_dataset)]) == 0
    rows = table_rows(capsys.readouterr().out)
    best = {r[1]: (r[3], r[4], r[5]) for r in rows[1:]}
    assert best == {
        "aaaa0001": ("broken", "250.0 us", "8.00x"),
        "bbbb0002": ("fast", "500.0 us", "4.00x"),  # broken failed this one
        "cccc0003": ("broken", "1.000 ms", "6.00x"),
    }


def test_empty_dataset_says_so(tmp_path, dataset_writer, capsys):
    write, _ = dataset_writer
    root = write(tmp_path / "ds", [])
    assert main(["report", "summary", "--local", str(root)]) == 1
    assert "no traces found" in capsys.readouterr().out


def test_missing_dataset_is_error_2(tmp_path, capsys):
    assert main(["report", "summary", "--local", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "none" in err and err.count("\n") == 1


def test_merge_unions_traces_and_drops_duplicates(tmp_path, dataset_writer, capsys):
    write, trace = dataset_writer
    u = [f"{s}-0000-0000-0000-000000000000" for s in SHORT]
    a = write(tmp_path / "a", [trace("fast", u[0], 16), trace("fast", u[1], 1024)])
    b = write(tmp_path / "b", [trace("fast", u[1], 1024), trace("broken", u[2], 65536, latency=3.0)])
    out = tmp_path / "merged"
    assert main(["report", "merge", "--local", str(a), "--local", str(b), "--output", str(out)]) == 0
    msg = capsys.readouterr().out
    # 3 workload records + 3 distinct traces added; 3 workload copies + 1 trace dropped
    assert "6 records added, 4 duplicates dropped" in msg
    ts = TraceSet.from_path(out)
    got = sorted((t.solution, t.workload.uuid[:8]) for t in ts.traces["vec_scale_f32"])
    assert got == [("broken", "cccc0003"), ("fast", "aaaa0001"), ("fast", "bbbb0002")]
    assert len(ts.workloads["vec_scale_f32"]) == 3  # identical workload files are not doubled
    assert sorted(s.name for s in ts.solutions["vec_scale_f32"]) == ["broken", "fast"]
    # merging again adds nothing
    assert main(["report", "merge", "--local", str(a), "--local", str(b), "--output", str(out)]) == 0
    assert "0 records added" in capsys.readouterr().out
    assert len(TraceSet.from_path(out).traces["vec_scale_f32"]) == 3


def test_merge_refuses_conflicting_definitions(tmp_path, dataset_writer, capsys):
    write, _ = dataset_writer
    a = write(tmp_path / "a", [])
    b = write(tmp_path / "b", [])
    (defn,) = (b / "definitions").rglob("*.json")
    data = json.loads(defn.read_text())
    data["description"] = "changed"
    defn.write_text(json.dumps(data))
    out = tmp_path / "merged"
    assert main(["report", "merge", "--local", str(a), "--local", str(b), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: report merge: ") and "differs from" in err
    assert not out.exists()  # nothing written before the conflict was found


def test_merge_rejects_non_dataset(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    assert main(["report", "merge", "--local", str(tmp_path / "x"), "--output", str(tmp_path / "o")]) == 2
    assert "pass a dataset folder" in capsys.readouterr().err
