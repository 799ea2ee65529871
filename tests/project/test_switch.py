"""Switching a fork to another definition/language, and refusing to overwrite work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.errors import ConfigError
from fib_core.project.config import load_config
from fib_core.project.switch import available_starters, switch_track

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"


def add_starter(root: Path, definition: str, language: str, files: dict[str, str]) -> None:
    d = root / "starters" / definition / language
    d.mkdir(parents=True)
    ext = "cu" if language == "cuda" else "py"
    (d / "starter.toml").write_text(
        f'[build]\nlanguage = "{language}"\nentry_point = "kernel.{ext}::run"\n'
        f'destination_passing_style = true\n[solution]\ndescription = "{definition} {language}"\n'
    )
    for rel, text in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)


@pytest.fixture
def fork(tmp_path: Path) -> Path:
    add_starter(tmp_path, DECODE, "triton", {"kernel.py": "def run(): 'decode'\n"})
    add_starter(tmp_path, DECODE, "cuda", {"kernel.cu": "// decode\n"})
    add_starter(tmp_path, PREFILL, "triton", {"kernel.py": "def run(): 'prefill'\n",
                                              "util/helpers.py": "X = 1\n"})
    return tmp_path


def test_lists_starters(fork: Path) -> None:
    assert available_starters(fork) == {DECODE: ["cuda", "triton"], PREFILL: ["triton"]}


def test_switch_installs_starter_and_rewrites_config(fork: Path) -> None:
    switch_track(fork, DECODE)
    result = switch_track(fork, PREFILL)  # decode's copy is unmodified: no refusal
    assert result.backup is None
    installed = fork / "solution" / "triton"
    assert (installed / "kernel.py").read_text() == "def run(): 'prefill'\n"
    assert (installed / "util" / "helpers.py").is_file()
    assert not (installed / "starter.toml").exists()
    cfg = load_config(fork / "config.toml")
    assert cfg.solution.definition == PREFILL
    assert cfg.build.entry_point == "kernel.py::run"
    assert cfg.solution.description == f"{PREFILL} triton"


def test_switch_keeps_author_and_benchmark_settings(fork: Path) -> None:
    switch_track(fork, DECODE)
    text = (fork / "config.toml").read_text().replace('author = "your-team"', 'author = "acme"')
    text = text.replace("# iterations = 50", "iterations = 20")
    (fork / "config.toml").write_text(text)
    switch_track(fork, DECODE, "cuda")
    cfg = load_config(fork / "config.toml")
    assert cfg.solution.author == "acme"
    assert cfg.benchmark.iterations == 20
    assert cfg.build.language == "cuda" and cfg.build.entry_point == "kernel.cu::run"


def test_refuses_to_overwrite_work_without_force(fork: Path) -> None:
    switch_track(fork, DECODE)
    kernel = fork / "solution" / "triton" / "kernel.py"
    kernel.write_text("def run(): 'my week of work'\n")
    with pytest.raises(ConfigError, match="holds your own work; refusing to overwrite"):
        switch_track(fork, PREFILL)
    assert kernel.read_text() == "def run(): 'my week of work'\n"
    assert load_config(fork / "config.toml").solution.definition == DECODE
    result = switch_track(fork, PREFILL, force=True)
    assert result.backup is not None
    assert (result.backup / "kernel.py").read_text() == "def run(): 'my week of work'\n"


def test_track_name_and_unknown_names(fork: Path) -> None:
    with pytest.raises(ConfigError, match="is a track; pass one of its definitions"):
        switch_track(fork, "gated_delta_net")
    with pytest.raises(ConfigError, match=f"did you mean '{DECODE}'"):
        switch_track(fork, "gdn_decode_qk4_v8_d128")
    with pytest.raises(ConfigError, match="has no cuda starter; available: triton"):
        switch_track(fork, PREFILL, "cuda")


def test_script_refusal_is_one_line(fork: Path, repo_root: Path, tmp_path: Path) -> None:
    """The real script against the real repository's starters, run in a copy of the fork."""
    script = repo_root / "scripts" / "switch_track.py"
    out = subprocess.run(
        [sys.executable, str(script), "not_a_definition"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no starter for definition")
