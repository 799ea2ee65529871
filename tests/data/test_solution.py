"""Solution parsing, safe source paths, entry points, and the content hash."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from fib_core.data import BuildSpec, Solution, SourceFile, SupportedLanguages
from fib_core.errors import SchemaError


def test_defaults_and_entry_point_parts(build):
    sol = Solution.from_dict(build.solution())
    assert sol.spec.language is SupportedLanguages.TRITON
    assert sol.spec.destination_passing_style is True
    assert sol.spec.binding == "tvm-ffi"
    assert sol.spec.dependencies == []
    assert sol.spec.entry_file == "kernel/main.py"
    assert sol.spec.entry_function == "run"
    assert sol.get_source("kernel/util.py").content == "# helpers\n"
    assert sol.get_source("missing.py") is None


def test_round_trip_does_not_add_defaults(build):
    raw = build.solution()
    assert Solution.from_dict(raw).to_dict() == raw
    raw = build.solution(dependencies=[], destination_passing_style=True, binding="tvm-ffi")
    out = Solution.from_dict(raw).to_dict()
    assert out == raw and list(out["spec"]) == list(raw["spec"])
    # Older files' build_commands are kept and written back; newer ones do not gain the key.
    old = build.solution(build_commands=["make"])
    assert Solution.from_dict(old).spec.build_commands == ["make"]
    assert Solution.from_dict(old).to_dict() == old
    assert "build_commands" not in Solution.from_dict(raw).model_dump()


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../escape.py", "a/../../b.py", "a//b.py", "dir/", "C:/x.py",
             "a\\b.py", ""],
)
def test_unsafe_source_paths_are_rejected(build, path):
    raw = build.solution()
    raw["sources"][1]["path"] = path
    with pytest.raises(SchemaError, match=r"^sources\[1\]\.path: found"):
        Solution.from_dict(raw)


@pytest.mark.parametrize("entry", ["kernel/main.py", "run", "kernel/main.py::", "::run",
                                   "kernel/main.py::run::x", "../main.py::run"])
def test_bad_entry_points(build, entry):
    raw = build.solution(entry_point=entry)
    with pytest.raises(SchemaError, match=r"^spec\.entry_point: found"):
        Solution.from_dict(raw)


def test_entry_file_must_be_a_source(build):
    raw = build.solution(entry_point="other.py::run")
    with pytest.raises(SchemaError, match=r"spec\.entry_point: found 'other.py::run', expected a "
                                          r"file listed in sources \(kernel/main.py, kernel/util.py\)"):
        Solution.from_dict(raw)


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"language": "rust"}, "spec.language"), ({"binding": "pybind"}, "spec.binding"),
     ({"destination_passing_style": "no"}, "spec.destination_passing_style"),
     ({"target_hardware": "B200"}, "spec.target_hardware")],
)
def test_bad_spec_fields(build, spec, field):
    with pytest.raises(SchemaError, match=rf"^{field}: found"):
        Solution.from_dict(build.solution(**spec))


def test_duplicate_source_paths(build):
    raw = build.solution()
    raw["sources"][1]["path"] = "kernel/main.py"
    with pytest.raises(SchemaError, match=r"sources\[1\]\.path.*unique source paths"):
        Solution.from_dict(raw)


def test_hash_covers_build_and_call_convention(build):
    base = Solution.from_dict(build.solution()).hash()
    assert len(base) == 64 and int(base, 16) >= 0
    # Renaming or re-attributing does not change what gets built.
    assert Solution.from_dict(build.solution(name="other", author="bob")).hash() == base
    # Writing a default explicitly is the same solution.
    assert Solution.from_dict(build.solution(destination_passing_style=True)).hash() == base
    # Source order does not matter to the build.
    raw = build.solution()
    raw["sources"].reverse()
    assert Solution.from_dict(raw).hash() == base
    changed = [
        build.solution(destination_passing_style=False),
        build.solution(binding="torch"),
        build.solution(language="python"),
        build.solution(dependencies=["cublas"]),
        build.solution(definition="another_def"),
        build.solution(entry_point="kernel/util.py::run"),
    ]
    raw = build.solution()
    raw["sources"][1]["content"] += " "
    changed.append(raw)
    hashes = {Solution.from_dict(c).hash() for c in changed}
    assert base not in hashes and len(hashes) == len(changed)


def test_hash_is_stable_across_processes(build):
    raw = build.solution()
    raw["sources"][1]["content"] = "# ünïcode ✓\n"
    here = Solution.from_dict(raw).hash()
    code = (
        "import json, sys\nfrom fib_core.data import Solution\n"
        "print(Solution.from_dict(json.loads(sys.stdin.read())).hash())\n"
    )
    seen = set()
    for seed in ("0", "12345"):  # dict/set iteration order must not leak into the hash
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps(raw), env=env,
                             capture_output=True, text=True, check=True)
        seen.add(out.stdout.strip())
    assert seen == {here}


def test_constructed_objects_validate():
    with pytest.raises(ValidationError, match=r"a relative path inside the solution"):
        SourceFile("../x", "")
    with pytest.raises(SchemaError, match=r"^path: found '\.\./x', expected a relative path"):
        SourceFile.from_dict({"path": "../x", "content": ""})
    spec = BuildSpec("cuda", ["B200"], "k.cu::run", destination_passing_style=False)
    assert spec.to_dict() == {"language": "cuda", "target_hardware": ["B200"],
                              "entry_point": "k.cu::run", "destination_passing_style": False}
