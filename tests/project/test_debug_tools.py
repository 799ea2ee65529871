"""--dump, --inline, --ncu, --sanitize: command construction and output parsing on recorded
tool output (CPU), the in-process flows on CPU, and the GPU tools themselves (marked gpu)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fib_core.errors import ConfigError
from fib_core.project.debug_dump import dump_uuids, largest_differences, write_dump
from fib_core.project.debug_run import NVTX_RANGE, OneCall
from fib_core.project.debug_tools import add_flags, requested_one_workload
from fib_core.project.ncu import (
    DEFAULT_SECTIONS,
    import_command,
    parse_sections,
    profile_command,
    summarize_raw_csv,
)
from fib_core.project.sanitizer import error_count, parse_findings, sanitizer_command

FIXTURES = Path(__file__).parent / "fixtures"

# Written from Nsight Compute's documented raw-page CSV layout: a header row of metric names,
# a row of units, one row per profiled kernel (with the tool's "==PROF==" lines before it).
NCU_RAW_CSV = """==PROF== Connected to process 4242
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum","dram__bytes.sum.per_second","sm__warps_active.avg.pct_of_peak_sustained_active","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
"","","","","","","","usecond","Tbyte/second","%","inst","inst","inst","inst"
"0","4242","python","gpu01","gdn_decode_kernel","1","7","12.35","2.87","61.25","4.51","0.12","0.80","1.02"
"1","4242","python","gpu01","finish_kernel","1","7","1.02","850.40","12.50","0.20","0","0","0.30"
"""

# Written from compute-sanitizer's documented memcheck report layout.
MEMCHECK_OUTPUT = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 2 bytes
=========     at _read_past_the_end+0x1b0 in /tmp/fib-py-a1b2/fib_solution_0a1b2c3d4e5f_77_1/kernel.py:10
=========     by thread (5,0,0) in block (0,0,0)
=========     Address 0x7f3a00000000 is out of bounds
=========     and is 17179869184 bytes after the nearest allocation at 0x7f3900000000 of size 1024 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: cuLaunchKernel [0x2cd3b7] in libcuda.so.1
=========
========= Invalid __global__ read of size 2 bytes
=========     at _read_past_the_end+0x1b0 in /tmp/fib-py-a1b2/fib_solution_0a1b2c3d4e5f_77_1/kernel.py:10
=========     by thread (6,0,0) in block (0,0,0)
=========     Address 0x7f3a00000002 is out of bounds
=========
========= ERROR SUMMARY: 2 errors
"""


def test_ncu_command_profiles_only_the_solution_range(tmp_path):
    child = [sys.executable, "-m", "fib_core.project.debug_run", "--workload", "3f2a", "--nvtx"]
    cmd = profile_command(tmp_path / "rep", child, ("SpeedOfLight", "Occupancy"))
    assert cmd[0] == "ncu" and cmd[-len(child):] == child
    assert cmd[cmd.index("--nvtx-include") + 1] == f"{NVTX_RANGE}/" and "--nvtx" in cmd
    assert [cmd[i + 1] for i, c in enumerate(cmd) if c == "--section"] == [
        "SpeedOfLight", "Occupancy"]
    assert cmd[cmd.index("--export") + 1] == str(tmp_path / "rep")
    assert cmd.count("--metrics") == 1
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert "dram__bytes.sum.per_second" in metrics and metrics[-1].startswith("regex:^smsp__")
    assert import_command(tmp_path / "rep.ncu-rep")[1:] == [
        "--import", str(tmp_path / "rep.ncu-rep"), "--page", "raw", "--csv"]
    assert parse_sections(None) == DEFAULT_SECTIONS == parse_sections("default")
    assert parse_sections("SpeedOfLight, Occupancy") == ("SpeedOfLight", "Occupancy")
    with pytest.raises(ConfigError, match="not a section name"):
        parse_sections("SpeedOfLight;rm -rf")


def test_ncu_summary_from_raw_csv():
    first, second = summarize_raw_csv(NCU_RAW_CSV)
    assert first.name == "gdn_decode_kernel"
    assert first.duration_ms == pytest.approx(0.01235)
    assert first.bandwidth_gbs == pytest.approx(2870.0)
    assert first.occupancy_pct == pytest.approx(61.25)
    assert [r for r, _ in first.stalls] == ["long_scoreboard", "wait", "math_pipe_throttle"]
    assert "DRAM 2870.0 GB/s" in first.line() and "occupancy 61.2%" in first.line()
    assert second.bandwidth_gbs == pytest.approx(850.4 * 1e12 / 1e9)
    assert summarize_raw_csv("") == []


def test_sanitizer_findings_name_the_solution_file():
    findings = parse_findings(MEMCHECK_OUTPUT, "solution/triton")
    assert len(findings) == 2
    f = findings[0]
    assert f.kind == "Invalid __global__ read of size 2 bytes"
    assert (f.file, f.line_no) == ("solution/triton/kernel.py", 10)
    assert f.detail == "Address 0x7f3a00000000 is out of bounds"
    assert f.line() == ("Invalid __global__ read of size 2 bytes at solution/triton/kernel.py:10 "
                        "(Address 0x7f3a00000000 is out of bounds)")
    assert error_count(MEMCHECK_OUTPUT) == 2 and error_count("crashed") is None
    cmd = sanitizer_command(["python", "x.py"], "racecheck")
    assert cmd[:3] == ["compute-sanitizer", "--tool", "racecheck"] and cmd[-2:] == ["python",
                                                                                     "x.py"]
    with pytest.raises(ConfigError, match="expected one of memcheck"):
        sanitizer_command(["python"], "leakcheck")


def test_sanitizer_bare_file_name_is_the_solution_file():
    """Triton's line tables name only the file (seen on an H100: ``in kernel.py:10``)."""
    output = ("========= Invalid __global__ read of size 2 bytes\n"
              "=========     at oob_kernel+0x1f0 in kernel.py:10\n"
              "=========     by thread (0,0,0) in block (3,0,0)\n"
              "=========     Address 0x7f0000000400 is out of bounds\n"
              "========= ERROR SUMMARY: 1 error\n")
    (f,) = parse_findings(output, "solution/triton")
    assert (f.file, f.line_no) == ("solution/triton/kernel.py", 10)
    (g,) = parse_findings(output.replace("in kernel.py", "in /abs/gen/kernel.py"), "solution/triton")
    assert g.file == "/abs/gen/kernel.py"
    (h,) = parse_findings(output, None)
    assert h.file == "kernel.py"


def test_flags_parse_and_only_one_at_a_time():
    p = argparse.ArgumentParser()
    add_flags(p)
    a = p.parse_args(["--ncu"])
    assert a.ncu == "default" and requested_one_workload(a) == "ncu"
    assert p.parse_args(["--sanitize"]).sanitize == "memcheck"
    assert p.parse_args(["--ncu", "Occupancy"]).ncu == "Occupancy"
    assert requested_one_workload(p.parse_args([])) is None
    with pytest.raises(ConfigError, match="one debugging flag at a time"):
        requested_one_workload(p.parse_args(["--inline", "--sanitize"]))


def test_modal_says_where_each_flag_works_instead():
    from fib_core.project.debug_tools import modal_refusal

    assert modal_refusal(dump="", inline=False, ncu="", sanitize="") is None
    for kwargs, flag in (({"inline": True}, "--inline"), ({"ncu": "default"}, "--ncu"),
                         ({"sanitize": "racecheck"}, "--sanitize racecheck"),
                         ({"dump": "d"}, "--dump d")):
        args = {"dump": "", "inline": False, "ncu": "", "sanitize": "", **kwargs}
        text = modal_refusal(**args)
        assert "not available on Modal" in text and f"run_local.py {flag}" in text
        assert "\n" not in text


def test_dump_writes_tensors_and_where_they_differ(tmp_path):
    from safetensors.torch import load_file

    from fib_core.checking import CheckResult
    from fib_core.data.trace import EvaluationStatus

    want = torch.zeros(4, 3)
    got = want.clone()
    got[2, 1] = 5.0
    got[0, 0] = float("nan")
    call = OneCall(inputs={"x": torch.ones(4, 3), "scale": 0.5}, outputs={"y": got},
                   reference={"y": want},
                   check=CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, None, "2 differ"))
    folder = write_dump(tmp_path / "dump" / "aaaaaaaa", call)
    assert torch.equal(load_file(folder / "inputs.safetensors")["x"], torch.ones(4, 3))
    assert load_file(folder / "outputs.safetensors")["y"][2, 1] == 5.0
    assert torch.equal(load_file(folder / "reference.safetensors")["y"], want)
    diff = (folder / "diff.txt").read_text()
    assert "verdict: INCORRECT_NUMERICAL" in diff and "scalar inputs: {'scale': 0.5}" in diff
    lines = largest_differences(got, want)
    assert lines[0].startswith("[0, 0]  got nan") and lines[1].startswith("[2, 1]  got 5")
    assert len(lines) == 2
    assert largest_differences(torch.zeros(2), torch.zeros(3)) == ["shape (2,), expected (3,)"]


def test_dump_picks_failed_then_chosen():
    traces = [{"workload": {"uuid": "a"}, "evaluation": {"status": "PASSED"}},
              {"workload": {"uuid": "b"}, "evaluation": {"status": "RUNTIME_ERROR"}}]
    assert dump_uuids(traces, chosen=False) == ["b"]
    traces[1]["evaluation"]["status"] = "PASSED"
    assert dump_uuids(traces, chosen=False) == []
    assert dump_uuids(traces, chosen=True) == ["a", "b"]


def _fork(repo_root: Path, tmp_path: Path, kernel: str | None = None) -> Path:
    fork = tmp_path / "fork"
    (fork / "solution" / "triton").mkdir(parents=True)
    src = repo_root / "solution" / "triton" / "kernel.py"
    (fork / "solution" / "triton" / "kernel.py").write_text(kernel or src.read_text())
    (fork / "config.toml").write_text((repo_root / "config.toml").read_text())
    return fork


def _run_local(repo_root: Path, fork: Path, *args: str, stdin: str | None = None):
    env = dict(os.environ, COLUMNS="160", PYTHONUNBUFFERED="1")
    env.pop("FIB_DATASET_PATH", None)
    return subprocess.run([sys.executable, str(repo_root / "scripts" / "run_local.py"), *args],
                          capture_output=True, text=True, cwd=fork, env=env, timeout=900,
                          input=stdin)


def test_dump_onto_a_file_is_refused_before_the_run(repo_root, tmp_path):
    (tmp_path / "taken").write_text("")
    proc = _run_local(repo_root, tmp_path, "--config", str(repo_root / "config.toml"),
                      "--dump", str(tmp_path / "taken"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"error: --dump {tmp_path / 'taken'}: is a file; pass a folder (it is made if missing)"


@pytest.mark.slow
def test_inline_runs_in_this_process_so_pdb_works(repo_root, tmp_path):
    text = (repo_root / "solution" / "triton" / "kernel.py").read_text()
    text += ("\n\n_real_run = run\n\n"
             "def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):\n"
             "    marker = 'inside the kernel'\n"
             "    breakpoint()\n"
             "    _real_run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state)\n")
    fork = _fork(repo_root, tmp_path, text)
    proc = _run_local(repo_root, fork, "--inline", "--workloads", "batch_size=1",
                      stdin="p marker\nc\n")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "(Pdb)" in proc.stdout and "'inside the kernel'" in proc.stdout
    assert "PASSED" in proc.stdout


@pytest.mark.slow
def test_dump_writes_a_failed_workloads_tensors(repo_root, tmp_path):
    text = (repo_root / "solution" / "triton" / "kernel.py").read_text()
    text += ("\n\n_real_run = run\n\n"
             "def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):\n"
             "    _real_run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state)\n"
             "    output[0, 0, 0, 0] += 100.0\n")
    fork = _fork(repo_root, tmp_path, text)
    proc = _run_local(repo_root, fork, "--workloads", "acfd1138", "--dump", "dump",
                      "--no-ledger")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    folders = list((fork / "dump").iterdir())
    assert len(folders) == 1 and "dumped " + folders[0].name in proc.stdout
    names = sorted(p.name for p in folders[0].iterdir())
    assert names == ["diff.txt", "inputs.safetensors", "outputs.safetensors",
                     "reference.safetensors"]
    diff = (folders[0] / "diff.txt").read_text()
    assert "output 'output'" in diff and diff.split("\n  ")[1].startswith("[0, 0, 0, 0]")


@pytest.mark.slow
def test_child_that_the_gpu_tools_launch_runs_one_call(repo_root, tmp_path):
    """The same child command --ncu/--sanitize wrap, on CPU: one call, its verdict, exit 0;
    a fib_core in the folder it starts from is not the one it imports."""
    from fib_core.project.debug_tools import child_command, child_env

    fork = _fork(repo_root, tmp_path)
    (tmp_path / "fib_core").mkdir()
    (tmp_path / "fib_core" / "__init__.py").write_text("raise ImportError('a stale copy')\n")
    cmd = child_command(fork / "config.toml", "acfd1138", nvtx=False)
    cmd[cmd.index("--device") + 1] = "cpu"
    env = child_env()
    env.pop("FIB_DATASET_PATH", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "acfd1138 PASSED"


needs_gpu_tools = pytest.mark.skipif(
    not torch.cuda.is_available() or shutil.which("compute-sanitizer") is None
    or shutil.which("ncu") is None, reason="needs a CUDA GPU, ncu and compute-sanitizer")


@pytest.mark.gpu
@needs_gpu_tools
def test_sanitize_names_the_planted_out_of_bounds_line(repo_root, tmp_path):
    kernel = (FIXTURES / "oob_triton" / "kernel.py").read_text()
    fork = _fork(repo_root, tmp_path, kernel)
    proc = _run_local(repo_root, fork, "--sanitize", "--workloads", "batch_size=1")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Invalid __global__ read" in proc.stdout
    assert "solution/triton/kernel.py:10" in proc.stdout
    assert "fib-py-" not in proc.stdout


@pytest.mark.gpu
@needs_gpu_tools
def test_sanitize_and_ncu_on_the_default_starter(repo_root, tmp_path):
    fork = _fork(repo_root, tmp_path)
    proc = _run_local(repo_root, fork, "--sanitize", "--workloads", "batch_size=1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "memcheck: 0 error(s)" in proc.stdout
    proc = _run_local(repo_root, fork, "--ncu", "--workloads", "batch_size=1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "report: runs/profiles/" in proc.stdout and "DRAM" in proc.stdout
    assert (fork / "runs" / "profiles").is_dir()
