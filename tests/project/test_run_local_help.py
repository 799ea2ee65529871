"""scripts/run_local.py --help: grouped flags, examples and exit codes, true on a CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_help_groups_every_flag_and_ends_with_examples_and_exit_codes(repo_root: Path) -> None:
    env = dict(os.environ, COLUMNS="100", CUDA_VISIBLE_DEVICES="")  # as on a CPU-only machine
    proc = subprocess.run(
        [sys.executable, str(repo_root / "scripts" / "run_local.py"), "--help"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    groups = ["\nrun:\n", "\ncompare and record:\n", "\ndebug:\n", "\nGPU:\n"]
    at = [text.find(g) for g in groups]
    assert all(i > 0 for i in at) and at == sorted(at), at
    sections = dict(zip(("run", "compare", "debug", "gpu"),
                        (text[a:b] for a, b in zip(at, [*at[1:], len(text)], strict=True)),
                        strict=True))
    assert "--config" in sections["run"] and "--workloads" in sections["run"]
    assert "--compare" in sections["compare"] and "--json" in sections["compare"]
    assert "--inline" in sections["debug"] and "--dump" in sections["debug"]
    assert "--gpus" in sections["gpu"] and "--ncu" in sections["gpu"]
    assert "--cross-check" in sections["gpu"]
    options = text[text.find("\noptions:\n"):at[0]]
    assert options.count("\n  -") == 1  # only -h, --help outside the groups
    assert "python scripts/run_local.py --inline --workloads" in text  # the examples
    assert "Exit status: 0 every workload passed (with --strict: the strict check too), 1" in text
    assert "2 a usage error" in text
    assert "this machine's GPU" not in text and "CPU smoke run" in text


def test_every_flag_has_help(repo_root: Path) -> None:
    sys.path.insert(0, str(repo_root / "scripts"))
    try:
        import run_local
    finally:
        sys.path.remove(str(repo_root / "scripts"))
    parser = run_local.build_parser()
    bare = [a.option_strings for a in parser._actions if a.option_strings and not a.help]
    assert bare == []
