"""scripts/submit.py on a real git fork holding both GDN kernels.

The fork is a copy of the kit in a temporary folder, made a track fork with
``switch_track.py --add`` and committed. Most tests replace the benchmark run by a recorded
verdict (the run itself is run_local's path, tested there); one slow test runs the real CPU
smoke check of both kernels through the script.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from fib_core.errors import ConfigError
from fib_core.project import runflow
from fib_core.project.config import load_config
from fib_core.project.submit import CONTEST, Evidence, SubmitOptions, submit
from fib_core.project.switch import add_definition

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
DECODE_SMALLEST = "acfd1138"  # the embedded batch_size=1 workload
PREFILL_SMALLEST = "1ccc9cc1"  # the embedded total_seq_len=6 workload
KIT = Path(__file__).resolve().parents[2]
KIT_PARTS = ("fib_core", "scripts", "starters", "solution", "config.toml", ".gitignore")


def git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


@pytest.fixture
def fork(tmp_path: Path) -> Path:
    """A committed copy of the kit holding the GDN decode and prefill starters."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "fork"
    root.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "runs")
    for part in KIT_PARTS:
        src = KIT / part
        if src.is_dir():
            shutil.copytree(src, root / part, ignore=skip)
        elif src.is_file():
            shutil.copy2(src, root / part)
    add_definition(root, PREFILL)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test Team")
    git(root, "config", "user.email", "team@example.com")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "track fork")
    return root


class Recorder:
    """A stand-in for the benchmark run: records the calls, returns a fixed verdict."""

    def __init__(self, scores: dict[str, float], passed: bool = True) -> None:
        self.scores = scores
        self.passed = passed
        self.calls: list[tuple[str, bool]] = []

    def __call__(self, ws, solution, smoke, console) -> Evidence:
        self.calls.append((ws.definition.name, smoke))
        return Evidence(CONTEST, self.passed, self.scores[ws.definition.name], "recorded")


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=100), out


@pytest.fixture
def on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runflow, "resolve_device", lambda requested: "cuda")


def test_tags_one_commit_per_definition_each_naming_it(fork: Path, on_gpu: None) -> None:
    head, branch = git(fork, "rev-parse", "HEAD"), git(fork, "branch", "--show-current")
    run = Recorder({DECODE: 2.0, PREFILL: 1.0})
    console, out = _console()
    assert submit(fork / "config.toml", SubmitOptions(), console, evaluate=run) == 0
    assert sorted(run.calls) == [(DECODE, False), (PREFILL, False)]
    text = out.getvalue()
    assert "track gated_delta_net: 1.500x" in text
    assert f"git push origin submission-{DECODE}-v1 submission-{PREFILL}-v1" in text
    for definition in (DECODE, PREFILL):
        tag = f"submission-{definition}-v1"
        config = tomllib.loads(git(fork, "show", f"{tag}:config.toml"))
        assert config["solution"]["definition"] == definition
        assert "track" not in config and config["build"]["language"] == "triton"
        assert git(fork, "ls-tree", "--name-only", f"{tag}:solution") == "triton"
        kernel = git(fork, "show", f"{tag}:solution/triton/kernel.py")
        mine = (fork / "solution" / definition / "triton" / "kernel.py").read_text()
        assert kernel == mine.rstrip("\n")
        assert git(fork, "rev-parse", f"{tag}^{{commit}}^") == head  # parent: the checked commit
    # the user's branch, index and working tree are untouched
    assert git(fork, "rev-parse", "HEAD") == head
    assert git(fork, "branch", "--show-current") == branch
    assert git(fork, "status", "--porcelain") == ""
    # the next submission gets the next version
    assert submit(fork / "config.toml", SubmitOptions(), console, evaluate=run) == 0
    assert git(fork, "tag", "--list", f"submission-{DECODE}-*").split() == [
        f"submission-{DECODE}-v1",
        f"submission-{DECODE}-v2",
    ]


def test_dry_run_checks_everything_and_tags_nothing(fork: Path, on_gpu: None) -> None:
    run = Recorder({DECODE: 2.0, PREFILL: 1.0})
    console, out = _console()
    assert submit(fork / "config.toml", SubmitOptions(dry_run=True), console, evaluate=run) == 0
    assert len(run.calls) == 2
    assert f"submission-{PREFILL}-v1" in out.getvalue()  # what would be tagged
    assert git(fork, "tag", "--list") == ""


def test_a_failing_definition_tags_nothing(fork: Path, on_gpu: None) -> None:
    run = Recorder({DECODE: 2.0, PREFILL: 0.0}, passed=False)
    console, out = _console()
    assert submit(fork / "config.toml", SubmitOptions(), console, evaluate=run) == 1
    assert git(fork, "tag", "--list") == ""
    assert "FAILED" in out.getvalue()


def test_one_definition_only(fork: Path, on_gpu: None) -> None:
    run = Recorder({DECODE: 2.0, PREFILL: 1.0})
    console, _ = _console()
    assert submit(fork / "config.toml", SubmitOptions(definition=PREFILL), console, run) == 0
    assert git(fork, "tag", "--list") == f"submission-{PREFILL}-v1"


def test_uncommitted_changes_are_refused(fork: Path, on_gpu: None) -> None:
    kernel = fork / "solution" / DECODE / "triton" / "kernel.py"
    kernel.write_text(kernel.read_text() + "\n# tweak\n")
    with pytest.raises(ConfigError, match="uncommitted changes.*kernel.py"):
        submit(fork / "config.toml", SubmitOptions(), _console()[0], Recorder({}))


def test_uncommitted_paths_are_named_whole(fork: Path) -> None:
    """Each path keeps its first letter, whatever the entry's place in git's status output."""
    from fib_core.project.tagging import uncommitted

    config = fork / "config.toml"
    config.write_text(config.read_text() + "\n# tweak\n")  # modified, not staged: " M"
    (fork / "new file.py").write_text("x = 1\n")  # untracked, with a space in its name
    git(fork, "mv", "scripts/submit.py", "scripts/send.py")  # a staged rename
    assert sorted(uncommitted(fork)) == ["config.toml", "new file.py", "scripts/send.py"]
    with pytest.raises(ConfigError, match=r"uncommitted changes in the fork \(config\.toml, "):
        submit(config, SubmitOptions(), _console()[0], Recorder({}))


def test_without_a_gpu_it_refuses_unless_smoke_is_allowed(fork: Path, monkeypatch) -> None:
    monkeypatch.setattr(runflow, "resolve_device", lambda requested: "cpu")
    run = Recorder({DECODE: 0.0, PREFILL: 0.0})
    console, out = _console()
    assert submit(fork / "config.toml", SubmitOptions(), console, evaluate=run) == 1
    assert run.calls == [] and git(fork, "tag", "--list") == ""
    assert "organizers' settings cannot run" in out.getvalue()


def test_audit_errors_stop_before_any_run(fork: Path, on_gpu: None) -> None:
    kernel = fork / "solution" / PREFILL / "triton" / "kernel.py"
    kernel.write_text("import flashinfer  # noqa\n" + kernel.read_text())
    config = fork / "config.toml"
    config.write_text(config.read_text() + '\n[audit]\nerrors = ["flashinfer-calls"]\n')
    git(fork, "commit", "-qam", "use flashinfer")
    run = Recorder({DECODE: 2.0, PREFILL: 1.0})
    console, out = _console()
    assert submit(config, SubmitOptions(), console, evaluate=run) == 1
    assert run.calls == [(DECODE, False)]  # prefill never ran
    assert "error: kernel.py:1: imports flashinfer" in out.getvalue()
    assert "[flashinfer-calls]" in out.getvalue()
    assert git(fork, "tag", "--list") == ""


def test_single_kernel_fork_tags_head(tmp_path: Path, on_gpu: None) -> None:
    root = tmp_path / "single"
    root.mkdir()
    for part in KIT_PARTS:
        src = KIT / part
        if src.is_dir():
            shutil.copytree(src, root / part, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            shutil.copy2(src, root / part)
    git(root, "init", "-q")
    git(root, "config", "user.name", "T")
    git(root, "config", "user.email", "t@example.com")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "single")
    definition = load_config(root / "config.toml").solution.definition
    console, out = _console()
    assert submit(root / "config.toml", SubmitOptions(), console, Recorder({definition: 1.2})) == 0
    tag = f"submission-{definition}-v1"
    assert git(root, "rev-parse", f"{tag}^{{commit}}") == git(root, "rev-parse", "HEAD")
    assert "1 of 2 definitions count 0" in out.getvalue()  # the track's other half is missing


def test_flashinfer_bench_accepts_each_tagged_solution(
    fork: Path, on_gpu: None, tmp_path: Path
) -> None:
    theirs = pytest.importorskip("flashinfer_bench.data")
    assert (
        submit(
            fork / "config.toml",
            SubmitOptions(),
            _console()[0],
            Recorder({DECODE: 2.0, PREFILL: 1.0}),
        )
        == 0
    )
    from fib_core.project.pack import pack_solution

    for definition in (DECODE, PREFILL):
        out = tmp_path / definition
        out.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(fork), "archive", f"submission-{definition}-v1"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
        solution = pack_solution(load_config(out / "config.toml"))
        parsed = theirs.Solution.model_validate_json(json.dumps(solution.to_dict()))
        assert parsed.definition == definition
        assert parsed.spec.entry_point == "kernel.py::run"
        assert {s.path for s in parsed.sources} == {s.path for s in solution.sources}


@pytest.mark.slow
def test_real_cpu_smoke_of_the_track_then_tags(fork: Path) -> None:
    """The script end to end: both kernels' CPU smoke checks (minutes on a small machine).
    The fork's config keeps one quick workload per definition (the filter applies to every
    definition of the track): the same path at a third of the CPU minutes."""
    config = fork / "config.toml"
    text = config.read_text()
    assert '# workloads = ["batch_size>=16"]' in text
    config.write_text(text.replace(
        '# workloads = ["batch_size>=16"]',
        f'workloads = ["{DECODE_SMALLEST}", "{PREFILL_SMALLEST}"]',
    ))
    git(fork, "commit", "-q", "-am", "one quick workload per definition")
    out = subprocess.run(
        [sys.executable, "scripts/submit.py", "--allow-smoke"],
        cwd=fork,
        capture_output=True,
        text=True,
        timeout=3600,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(fork), "HOME": str(fork.parent)},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "CPU smoke" in out.stdout and "no track score" in out.stdout
    assert out.stdout.count("1/1 quick workloads correct") == 2, out.stdout[-3000:]
    for definition in (DECODE, PREFILL):
        message = git(fork, "tag", "-l", "--format=%(contents)", f"submission-{definition}-v1")
        assert "CPU smoke check only" in message
    again = subprocess.run(  # the runs just made are in the ledger: nothing runs again
        [sys.executable, "scripts/submit.py", "--dry-run", "--allow-smoke"],
        cwd=fork, capture_output=True, text=True, timeout=600,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(fork), "HOME": str(fork.parent)},
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("from the ledger, 1/1 quick workloads correct") == 2
    assert "PASSED" not in again.stdout  # no progress line: no workload ran


def _record_smoke_run(fork: Path, definition: str, **flags) -> str:
    """Append to the fork's ledger a passing CPU run of ``definition`` recorded as
    run_local.py records one (its settings from the same request), run id returned."""
    from fib_core.project.recording import RunRecording
    from fib_core.project.runflow import RunOptions, make_request
    from fib_core.project.workspace import open_workspace
    from fib_core.report.results import CPU_SMOKE_MODE, RunResults, WorkloadResult

    ws = open_workspace(fork / "config.toml", definition)
    solution = ws.pack()
    request = make_request(ws.cfg, solution, RunOptions(flags=flags), "cpu")
    recording = RunRecording.for_run(fork, solution, request)
    rows = [WorkloadResult(uuid=t.workload.uuid, axes=dict(t.workload.axes), status="PASSED",
                           latency_ms=900.0) for t in ws.trace_set.workloads[definition][:3]]
    results = RunResults(definition=definition, solution=solution.name, device="cpu",
                         mode=CPU_SMOKE_MODE, rows=rows)
    assert recording.keep(results, _console()[0]) == []
    return recording.recorded.run_id


def _record_contest_run(fork: Path, definition: str, *, quick: bool = False, fail: bool = False):
    """Append to the fork's ledger a GPU run of ``definition`` as run_local.py --contest does."""
    from fib_core.bench.grading import eval_settings
    from fib_core.project.workspace import open_workspace
    from fib_core.report.ledger import LEDGER_RELPATH, append_record, new_record
    from fib_core.report.results import RunResults, WorkloadResult

    ws = open_workspace(fork / "config.toml", definition)
    solution = ws.pack()
    rows = [
        WorkloadResult(
            uuid=t.workload.uuid,
            axes=dict(t.workload.axes),
            status="PASSED",
            latency_ms=0.01,
            reference_latency_ms=0.03,
            speedup=3.0,
        )
        for t in ws.trace_set.workloads[definition]
    ]
    if fail:
        rows[0] = WorkloadResult(
            uuid=rows[0].uuid, axes=rows[0].axes, status="RUNTIME_ERROR", reason="boom"
        )
    results = RunResults(
        definition=definition, solution=solution.name, gpu_name="NVIDIA B200", rows=rows
    )
    config = {
        "engine": eval_settings(definition).contest_fields(),
        "filters": None,
        "quick": quick,
        "build": {},
        "device": None,
        "cross_check": False,
    }
    record = new_record(
        results,
        root=fork,
        solution_name=solution.name,
        solution_hash=solution.hash(),
        config=config,
    )
    append_record(fork / LEDGER_RELPATH, record)
    return record


def test_a_passing_ledger_run_of_the_same_hash_is_accepted(fork: Path, on_gpu: None) -> None:
    record = _record_contest_run(fork, DECODE)
    run = Recorder({DECODE: 9.0, PREFILL: 1.0})
    console, out = _console()
    assert submit(fork / "config.toml", SubmitOptions(), console, evaluate=run) == 0
    assert run.calls == [(PREFILL, False)]  # decode came from the ledger
    text = out.getvalue()
    assert f"ledger: run {record.run_id} on NVIDIA B200" in text
    assert "track gated_delta_net: 2.000x" in text  # (3.0 + 1.0) / 2
    # --rerun ignores the ledger
    run = Recorder({DECODE: 2.0, PREFILL: 1.0})
    assert submit(fork / "config.toml", SubmitOptions(dry_run=True, rerun=True), console, run) == 0
    assert sorted(run.calls) == [(DECODE, False), (PREFILL, False)]


@pytest.mark.parametrize("kind", ["quick", "failed", "other solution"])
def test_ledger_runs_that_do_not_prove_the_submission_are_not_used(
    fork: Path, on_gpu: None, kind: str
) -> None:
    _record_contest_run(fork, DECODE, quick=kind == "quick", fail=kind == "failed")
    if kind == "other solution":
        kernel = fork / "solution" / DECODE / "triton" / "kernel.py"
        kernel.write_text(kernel.read_text() + "\n# changed after the run\n")
        git(fork, "commit", "-qam", "change")
    run = Recorder({DECODE: 2.0, PREFILL: 1.0})
    assert submit(fork / "config.toml", SubmitOptions(dry_run=True), _console()[0], run) == 0
    assert sorted(run.calls) == [(DECODE, False), (PREFILL, False)]


def test_without_a_gpu_a_passing_smoke_run_in_the_ledger_is_reused(
    fork: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runflow, "resolve_device", lambda requested: "cpu")
    decode = _record_smoke_run(fork, DECODE)  # as a plain run_local.py on this CPU
    _record_smoke_run(fork, PREFILL, workloads=(PREFILL_SMALLEST,))  # other settings
    run = Recorder({DECODE: 0.0, PREFILL: 0.0})
    console, out = _console()
    options = SubmitOptions(dry_run=True, allow_smoke=True)
    assert submit(fork / "config.toml", options, console, evaluate=run) == 0
    assert run.calls == [(PREFILL, True)]  # the filtered prefill run proves nothing
    assert f"run {decode} from the ledger, 3/3 quick workloads correct" in out.getvalue()
    assert "`python scripts/submit.py --allow-smoke` tags" in out.getvalue()
    run = Recorder({DECODE: 0.0, PREFILL: 0.0})
    options = SubmitOptions(dry_run=True, allow_smoke=True, rerun=True)
    assert submit(fork / "config.toml", options, _console()[0], evaluate=run) == 0
    assert sorted(run.calls) == [(DECODE, True), (PREFILL, True)]


def test_a_refusal_says_the_one_next_step(fork: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runflow, "resolve_device", lambda requested: "cpu")
    console, out = _console()
    assert submit(fork / "config.toml", SubmitOptions(dry_run=True), console, Recorder({})) == 1
    last = " ".join(out.getvalue().split("not tagged:")[-1].split())
    assert "commit" not in last  # the tree is committed: that is not what is missing
    assert "on a GPU machine" in last and "--allow-smoke" in last
    monkeypatch.setattr(runflow, "resolve_device", lambda requested: "cuda")
    console, out = _console()
    failing = Recorder({DECODE: 1.0, PREFILL: 1.0}, passed=False)
    assert submit(fork / "config.toml", SubmitOptions(), console, failing) == 1
    last = " ".join(out.getvalue().split("not tagged:")[-1].split())
    assert f"{DECODE}, {PREFILL} failed" in last and "run_local.py --definition" in last


def test_track_run_helpers(tmp_path: Path) -> None:
    from fib_core.project.runflow import RunOptions
    from fib_core.project.track_run import options_for, score_track
    from fib_core.report.results import RunResults, WorkloadResult

    opts = RunOptions(json_path=Path("out/run.json"))
    assert options_for(opts, DECODE, True).json_path == Path(f"out/run-{DECODE}.json")
    assert options_for(opts, DECODE, False).json_path == Path("out/run.json")

    def results(definition: str, speedup: float, device: str = "cuda") -> RunResults:
        row = WorkloadResult(
            uuid="w",
            axes={},
            status="PASSED",
            latency_ms=1.0,
            reference_latency_ms=speedup,
            speedup=speedup,
        )
        return RunResults(definition=definition, solution="s", device=device, rows=[row])

    ts = score_track({DECODE: results(DECODE, 4.0)})
    assert ts is not None and ts.score == pytest.approx(2.0) and ts.missing == (PREFILL,)
    assert score_track({DECODE: results(DECODE, 4.0, device="cpu")}) is None


def test_tampering_patterns_are_shown_but_do_not_block(fork: Path, on_gpu: None) -> None:
    kernel = fork / "solution" / DECODE / "triton" / "kernel.py"
    kernel.write_text("import sys\n_caller = sys._getframe(1)\n" + kernel.read_text())
    git(fork, "commit", "-qam", "introspection")
    console, out = _console()
    run = Recorder({DECODE: 2.0, PREFILL: 1.0})
    assert submit(fork / "config.toml", SubmitOptions(dry_run=True), console, run) == 0
    assert "kernel.py:2" in out.getvalue() and "[tampering]" in out.getvalue()


@pytest.mark.slow
def test_run_local_track_runs_both_definitions_and_says_there_is_no_score(fork: Path) -> None:
    """run_local.py --track on a CPU: both smoke runs, one JSON each, no track score."""
    # One quick workload per definition (uuid prefixes; a filter keeps what any of them
    # matches): the run is the same path, at a third of the CPU minutes.
    one_each = ["--workloads", DECODE_SMALLEST, PREFILL_SMALLEST]
    out = subprocess.run(
        [sys.executable, "scripts/run_local.py", "--track", "--no-ledger", "--json", "r.json",
         *one_each],
        cwd=fork,
        capture_output=True,
        text=True,
        timeout=3600,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(fork), "HOME": str(fork), "COLUMNS": "120"},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "track (CPU smoke: correctness only, no score)" in out.stdout
    assert out.stdout.count("Ran 1 of ") == 2  # the filter reached both definitions' runs
    for definition in (DECODE, PREFILL):
        assert (fork / f"r-{definition}.json").is_file()
        assert f"{definition}" in out.stdout.split("track (CPU smoke", 1)[1]
