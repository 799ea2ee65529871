"""The CPU smoke run is honest and still catches cheating: CPU-sized defaults, no score line,
two input sets and a re-checked timed call, so a kernel replaying its first result fails."""

from __future__ import annotations

import json

from fib_core.bench.settings import CPU_SMOKE, merge
from fib_core.cli import main

# Computes its first call only, then hands back that result (by value) for every later call.
REPLAY = (
    "_first = {}\n"
    "def run(x):\n"
    "    if x.numel() not in _first:\n"
    "        _first[x.numel()] = x + x\n"
    "    return _first[x.numel()].clone()\n"
)


def test_cpu_defaults_fill_only_what_was_not_given():
    sized = merge(cpu=True, flags={"device": "cpu", "iterations": 7})
    assert sized["iterations"] == 7 and sized["device"] == "cpu"
    assert sized["num_input_sets"] >= 2 and sized["warmup_runs"] == 0
    assert sized["profile_baseline"] is False
    assert {k: v for k, v in sized.items() if k not in ("iterations", "device")} == {
        k: v for k, v in CPU_SMOKE.items() if k != "iterations"}


def test_replaying_kernel_fails_on_cpu_with_the_default_settings(tmp_path, dataset_writer,
                                                                  capsys):
    write, _ = dataset_writer
    root = write(tmp_path / "ds", [])
    sol = json.loads(next((root / "solutions").rglob("fast.json")).read_text())
    sol["name"] = "replay"
    sol["sources"][0]["content"] = REPLAY
    sol_file = tmp_path / "replay.json"
    sol_file.write_text(json.dumps(sol))
    code = main(["run", "--local", str(root), "--local", str(sol_file), "--device", "cpu",
                 "--solutions", "fast", "replay", "--no-save-results"])
    out = capsys.readouterr().out
    assert code == 1
    replay = out[out.index("replay by"):]
    fast = out[out.index("fast by"):out.index("replay by")]
    assert "Passed: 0/3" in replay and replay.count("INCORRECT_NUMERICAL") >= 3
    assert "input set 1" in replay  # caught by the second input set, before any timing
    assert "Passed: 3/3" in fast
    assert "Score" not in out and "No score: a CPU smoke run checks correctness only" in fast
