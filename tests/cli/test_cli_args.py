"""CLI parsing: only flags the user set reach the benchmark config; mistakes exit 2."""

from __future__ import annotations

import pytest

from fib_core.bench.config import BenchmarkConfig
from fib_core.cli import main
from fib_core.commands import build_parser, classify_local, config_overrides


def overrides(*argv: str) -> dict:
    return config_overrides(build_parser().parse_args(["run", *argv]))


def test_unset_flags_are_not_passed():
    assert overrides() == {}
    assert overrides("--local", "somewhere") == {}


def test_set_flags_map_to_config_fields():
    got = overrides(
        "--warmup-runs", "0", "--iterations", "5", "--num-trials", "2", "--atol", "0.5",
        "--rtol", "0", "--required-matched-ratio", "0.9", "--timeout", "12.5", "--isolated",
        "--device", "cpu", "--seed", "7", "--definitions", "a", "b", "--solutions", "s",
        "--workloads", "abcdef12",
    )
    assert got == {
        "warmup_runs": 0, "iterations": 5, "num_trials": 2, "atol": 0.5, "rtol": 0.0,
        "required_matched_ratio": 0.9, "timeout_seconds": 12.5, "isolated": True,
        "device": "cpu", "seed": 7, "definitions": ("a", "b"), "solutions": ("s",),
        "workloads": ("abcdef12",),
    }
    config = BenchmarkConfig(**got)  # every mapped name is a real config field
    assert config.warmup_runs == 0 and config.timeout_seconds == 12.5 and config.isolated


def test_zero_values_count_as_set():
    assert overrides("--atol", "0", "--seed", "0") == {"atol": 0.0, "seed": 0}


def test_run_only_flags_stay_out_of_config():
    args = build_parser().parse_args(["run", "--resume", "--no-save-results", "--log-level", "info"])
    assert config_overrides(args) == {}
    assert (args.resume, args.save_results, args.log_level) == (True, False, "INFO")
    args = build_parser().parse_args(["run"])
    assert (args.resume, args.save_results) == (None, None)


def test_usage_mistakes_exit_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["run", "--iterations", "many"])
    assert err.value.code == 2
    assert "error: argument --iterations: invalid int value: 'many'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        main(["report"])
    assert err.value.code == 2


def test_bad_config_value_is_one_error_line(capsys, tmp_path):
    assert main(["run", "--iterations", "0", "--local", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "iterations" in err


def test_missing_local_path_is_one_error_line(capsys, tmp_path):
    assert main(["run", "--local", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --local {tmp_path / 'nowhere'}: no such file or folder; pass a dataset folder or a solution JSON\n"


def test_classify_local(tmp_path):
    ds = tmp_path / "ds"
    (ds / "definitions").mkdir(parents=True)
    sols = tmp_path / "sols" / "nested"
    sols.mkdir(parents=True)
    (sols / "a.json").write_text("{}")
    single = tmp_path / "b.json"
    single.write_text("{}")
    assert classify_local([ds, tmp_path / "sols", single, ds]) == ([ds], [sols / "a.json", single])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(Exception, match="neither a dataset"):
        classify_local([empty])


def test_load_local_merges_datasets_and_checks_solutions(tmp_path, dataset_writer):
    import json

    from fib_core.commands import load_local
    from fib_core.errors import FibError

    write, trace = dataset_writer
    uuid = "aaaa0001-0000-0000-0000-000000000000"
    a = write(tmp_path / "a", [trace("fast", uuid, 16)])
    b = write(tmp_path / "b", [trace("broken", uuid, 16)])
    ts = load_local([a, b], persist_solutions=False)
    assert ts.root == a
    assert sorted(s.name for s in ts.solutions["vec_scale_f32"]) == ["broken", "fast"]
    assert len(ts.workloads["vec_scale_f32"]) == 3  # shared workloads kept once
    assert len(ts.traces["vec_scale_f32"]) == 2
    clash = json.loads(next((a / "solutions").rglob("fast.json")).read_text())
    clash["sources"][0]["content"] += "# changed\n"
    clash_file = tmp_path / "clash.json"
    clash_file.write_text(json.dumps(clash))
    # An edited solution file replaces the copy a previous run stored (same name, same author).
    ts = load_local([a, clash_file], persist_solutions=True)
    fast = [s for s in ts.solutions["vec_scale_f32"] if s.name == "fast"]
    assert len(fast) == 1 and fast[0].sources[0].content.endswith("# changed\n")
    stored = next((a / "solutions").rglob("fast.json"))
    assert json.loads(stored.read_text())["sources"][0]["content"].endswith("# changed\n")
    assert len(list((a / "solutions").rglob("fast.json"))) == 1
    # Under another author it would be filed twice: refused, naming the copy to remove.
    clash["author"] = "someone else"
    clash["sources"][0]["content"] += "# again\n"
    clash_file.write_text(json.dumps(clash))
    with pytest.raises(FibError, match=f"already in the dataset at {stored}.*remove that file"):
        load_local([a, clash_file], persist_solutions=False)
    clash["definition"] = "unknown_def"
    clash_file.write_text(json.dumps(clash))
    with pytest.raises(FibError, match="which the dataset does not hold"):
        load_local([a, clash_file], persist_solutions=False)
