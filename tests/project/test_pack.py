"""Packing solution/<language>/ into a Solution: nested trees, exclusions, signature checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from fib_core.data import Definition, Solution
from fib_core.errors import ConfigError, SignatureError
from fib_core.project.config import load_config
from fib_core.project.pack import collect_sources, pack_solution

DEFINITION = Definition.from_dict(
    {
        "name": "toy_scale",
        "op_type": "toy",
        "axes": {"n": {"type": "var"}},
        "inputs": {
            "x": {"shape": ["n"], "dtype": "float32"},
            "alpha": {"shape": None, "dtype": "float32"},
        },
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "def run(x, alpha):\n    return x * alpha\n",
    }
)

CONFIG = """
[solution]
name = "team-toy"
definition = "toy_scale"
author = "team"

[build]
language = "{language}"
entry_point = "{entry}"
destination_passing_style = {dps}
"""


def make_fork(tmp_path: Path, files: dict[str, str], *, language: str = "triton",
              entry: str = "kernel.py::run", dps: bool = True) -> Path:
    for rel, text in files.items():
        path = tmp_path / "solution" / language / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG.format(language=language, entry=entry, dps=str(dps).lower()))
    return cfg


def test_nested_tree_is_packed_and_build_outputs_excluded(tmp_path: Path) -> None:
    cfg = make_fork(
        tmp_path,
        {
            "kernel.py": "from .ops.scale import scale\n\ndef run(x, alpha, y):\n    scale(x, alpha, y)\n",
            "ops/__init__.py": "",
            "ops/scale.py": "def scale(x, a, y):\n    y.copy_(x * a)\n",
            "ops/__pycache__/scale.cpython-311.pyc": "junk",
            "build/lib.so": "junk",
            ".hidden/notes.txt": "private",
            "kernel.py~": "editor backup",
            "starter.toml": "[build]\n",
        },
    )
    solution = pack_solution(load_config(cfg), DEFINITION)
    assert isinstance(solution, Solution)
    assert [s.path for s in solution.sources] == ["kernel.py", "ops/__init__.py", "ops/scale.py"]
    # The organizers' schema rejects empty sources: an empty __init__.py is packed as "\n".
    assert solution.get_source("ops/__init__.py").content == "\n"
    assert solution.spec.entry_point == "kernel.py::run"
    assert solution.spec.destination_passing_style is True
    assert Solution.from_dict(solution.to_dict()).hash() == solution.hash()


def test_binary_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00\x01")
    (tmp_path / "k.py").write_text("x = 1\n")
    with pytest.raises(ConfigError, match="blob.bin: not a UTF-8 text file"):
        collect_sources(tmp_path)


def test_missing_source_folder(tmp_path: Path) -> None:
    cfg = make_fork(tmp_path, {})
    with pytest.raises(ConfigError, match=r"solution/triton: source folder not found"):
        pack_solution(load_config(cfg), DEFINITION)


def test_missing_entry_file_lists_what_is_there(tmp_path: Path) -> None:
    cfg = make_fork(tmp_path, {"main.py": "def run(x, alpha, y): pass\n"})
    with pytest.raises(ConfigError, match=r"'kernel.py' is not in .* \(found: main.py\)"):
        pack_solution(load_config(cfg), DEFINITION)


def test_missing_function_lists_functions(tmp_path: Path) -> None:
    cfg = make_fork(tmp_path, {"kernel.py": "def forward(x, alpha, y): pass\n"})
    with pytest.raises(ConfigError, match=r"no top-level function 'run' \(found: forward\)"):
        pack_solution(load_config(cfg), DEFINITION)


def test_value_returning_function_under_dps_names_the_key(tmp_path: Path) -> None:
    cfg = make_fork(tmp_path, {"kernel.py": "def run(x, alpha):\n    return x * alpha\n"})
    with pytest.raises(SignatureError) as info:
        pack_solution(load_config(cfg), DEFINITION)
    msg = str(info.value)
    assert msg.startswith(
        "expected run(x, alpha, y) (destination-passing style: inputs then outputs), "
        "got run(x, alpha)"
    )
    assert "`destination_passing_style = false` under [build] in config.toml" in msg


def test_dps_function_with_dps_off(tmp_path: Path) -> None:
    cfg = make_fork(tmp_path, {"kernel.py": "def run(x, alpha, y): pass\n"}, dps=False)
    with pytest.raises(SignatureError, match=r"expected run\(x, alpha\) \(value-returning style"):
        pack_solution(load_config(cfg), DEFINITION)


def test_defaults_and_varargs_are_accepted(tmp_path: Path) -> None:
    cfg = make_fork(tmp_path, {"kernel.py": "def run(x, alpha, y, debug=False): pass\n"})
    pack_solution(load_config(cfg), DEFINITION)
    cfg = make_fork(tmp_path, {"kernel.py": "def run(*args): pass\n"})
    pack_solution(load_config(cfg), DEFINITION)


def test_cuda_export_is_checked(tmp_path: Path) -> None:
    src = '#include <tvm/ffi/function.h>\nvoid impl() {}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, impl);\n'
    cfg = make_fork(tmp_path, {"kernel.cu": src}, language="cuda", entry="kernel.cu::run")
    solution = pack_solution(load_config(cfg), DEFINITION)
    assert solution.spec.binding == "tvm-ffi"
    cfg = make_fork(tmp_path, {"kernel.cu": src}, language="cuda", entry="kernel.cu::launch")
    with pytest.raises(ConfigError, match=r"does not export 'launch'"):
        pack_solution(load_config(cfg), DEFINITION)
