"""Bad dataset files and solution sources: one line naming file, line, field and value.

One test per class of bad input. Each asserts the exact message (or status) and that nothing
appeared outside the folders the command may write (the dataset and the cache it was given).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from fib_core.data import Solution, TraceSet
from fib_core.data.blobs import resolve_blob_path
from fib_core.data.errors import DatasetError
from fib_core.data.json_io import dump_json, iter_jsonl, load_json
from fib_core.data.trace import Correctness
from fib_core.errors import ConfigError, SchemaError

from .conftest import TOY_DEFINITION, listing, run_cli, solution, workload

NAME_RULE = (
    "expected a name usable as a file name (no '/', '\\', '..', NUL, leading '.'; at most 200 "
    "bytes) (rename it, e.g. letters, digits and '_' only)"
)
BLOB_RULE = "expected a path relative to the dataset root, inside it"
STANDARD_JSON = (
    'expected standard JSON (write non-finite numbers as the strings "NaN", "Infinity", '
    '"-Infinity")'
)
TOO_DEEP = (
    "found 'nesting too deep to parse', expected a JSON value nested less deeply (the file is "
    "broken or not a dataset file)"
)


def _error_of(root: Path) -> str:
    with pytest.raises(SchemaError) as info:
        TraceSet.from_path(root)
    return str(info.value)


def test_definition_name_or_op_type_that_escapes(tmp_path, make_dataset, cache_dir):
    file = None
    for field, value in [("name", "../../escape"), ("name", "/tmp/escape"), ("op_type", "../up")]:
        bad = copy.deepcopy(TOY_DEFINITION)
        bad[field] = value
        root = make_dataset(definition=bad, solutions=[solution()])
        file = root / "definitions" / "toy_add.json"
        assert _error_of(root) == f"{file}: {field}: found {value!r}, {NAME_RULE}"
    # Through the CLI: one line, exit 2, and no trace or reference file anywhere.
    before = listing(tmp_path)
    done = run_cli(
        ["run", "--local", str(root), "--device", "cpu"],
        cwd=tmp_path,
        env={"FIB_CACHE_DIR": str(cache_dir)},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"error: {file}: op_type: found '../up', {NAME_RULE}\n"
    assert "Traceback" not in done.stdout + done.stderr
    assert listing(tmp_path) == before
    assert not (tmp_path.parent / "up").exists()


def test_workload_blob_path_absolute_or_climbing_out(tmp_path, make_dataset):
    secret = tmp_path / "secret.safetensors"
    secret.write_bytes(b"not for the kit")
    file = None
    for path, why in [
        ("/srv/secret.safetensors", "an absolute path"),
        ("./blob/../../secret.safetensors", "a path that climbs out of the dataset root"),
    ]:
        root = make_dataset(
            workloads=[workload(x={"type": "safetensors", "path": path, "tensor_key": "x"})]
        )
        file = root / "workloads" / "toy_add.jsonl"
        assert _error_of(root) == (
            f"{file}:1: workload.inputs.x.path: found {path!r}, {BLOB_RULE} (it is {why}; move "
            "the blob under the dataset's blob/ folder)"
        )
    # The reading helpers refuse it as well (a workload built in code, not loaded).
    with pytest.raises(DatasetError, match=r"it is outside the dataset root"):
        resolve_blob_path(tmp_path / "ds", secret)
    with pytest.raises(DatasetError, match=r"it is a path that climbs out of the dataset root"):
        resolve_blob_path(tmp_path / "ds", "blob/../../secret.safetensors")
    inside = resolve_blob_path(tmp_path / "ds", "./blob/a/../b.safetensors")
    assert os.path.normpath(inside) == str(tmp_path / "ds" / "blob" / "b.safetensors")


def test_pack_symlink_pointing_outside_the_solution_folder(tmp_path):
    from fib_core.project.pack import collect_sources

    folder = tmp_path / "solution" / "triton"
    folder.mkdir(parents=True)
    (folder / "kernel.py").write_text("def run(x):\n    return x\n")
    outside = tmp_path / "private.py"
    outside.write_text("TOKEN = 'do not pack me'\n")
    (folder / "helper.py").symlink_to(outside)
    with pytest.raises(ConfigError) as info:
        collect_sources(folder)
    assert str(info.value) == (
        f"{folder / 'helper.py'}: a symbolic link to {outside}, outside {folder}; a solution "
        "packs only its own files (copy the file into the folder or remove the link)"
    )
    # A link that stays inside the folder is packed as the file it points at.
    (folder / "helper.py").unlink()
    (folder / "same.py").symlink_to(folder / "kernel.py")
    assert [p for p, _ in collect_sources(folder)] == ["kernel.py", "same.py"]
    # A linked folder outside: its files would be left out without a word.
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "util.py").write_text("X = 1\n")
    (folder / "lib").symlink_to(lib)
    with pytest.raises(ConfigError, match=r"lib: a symbolic link to the folder .*lib, outside"):
        collect_sources(folder)


def test_report_merge_symlinked_blob(tmp_path, make_dataset):
    source = make_dataset(root=tmp_path / "a")
    (source / "blob").mkdir()
    outside = tmp_path / "home_secret.txt"
    outside.write_text("secret\n")
    (source / "blob" / "x.safetensors").symlink_to(outside)
    output = tmp_path / "merged"
    before = listing(tmp_path)
    done = run_cli(
        ["report", "merge", "--local", str(source), "--output", str(output)], cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: report merge: {source / 'blob' / 'x.safetensors'} is a symbolic link to "
        f"{outside}, outside {source}; copy the file into the dataset or remove the link\n"
    )
    assert listing(tmp_path) == before


def test_workload_axes_contradicting_the_definition(make_dataset):
    const = workload()
    const["workload"]["axes"]["d"] = 16
    root = make_dataset(workloads=[workload("w-0"), const])
    file = root / "workloads" / "toy_add.jsonl"
    assert _error_of(root) == (
        f"{file}:2: workload.axes.d: found 16, expected 8 (a const axis of toy_add) (remove the "
        "axis from the workload or fix its value)"
    )
    unknown = workload()
    unknown["workload"]["axes"]["m"] = 3
    root = make_dataset(workloads=[unknown])
    assert _error_of(root) == (
        f"{file}:1: workload.axes: found 'm', expected an axis of toy_add (n, d) (remove it from "
        "the workload or fix the name)"
    )
    same = workload()
    same["workload"]["axes"]["d"] = 8  # the const value spelled out is fine
    assert TraceSet.from_path(make_dataset(workloads=[same])).workloads["toy_add"]


def test_scalar_given_for_a_tensor_input(make_dataset):
    root = make_dataset(workloads=[workload(y={"type": "scalar", "value": 1.0})])
    assert _error_of(root) == (
        f"{root / 'workloads' / 'toy_add.jsonl'}:1: workload.inputs.y.type: found 'scalar', "
        "expected \"random\" or \"safetensors\" for tensor input 'y' (shape ['n', 'd']) (scalars "
        "are only for inputs whose shape is null)"
    )


def test_nan_and_infinity_literals_in_json(tmp_path, make_dataset):
    text = json.dumps(TOY_DEFINITION, indent=1)[:-2] + ',\n "tolerance": {"atol": NaN}\n}'
    root = make_dataset()
    file = root / "definitions" / "toy_add.json"
    file.write_text(text)
    line = text.splitlines().index(' "tolerance": {"atol": NaN}') + 1
    assert _error_of(root) == f"{file}:{line}: found 'bare NaN', {STANDARD_JSON}"
    root = make_dataset(
        workloads=[workload("w-0"), workload("w-1", scale={"type": "scalar", "value": 0.5})]
    )
    wl = root / "workloads" / "toy_add.jsonl"
    wl.write_text(wl.read_text().replace('"value": 0.5', '"value": -Infinity'))
    assert _error_of(root) == f"{wl}:2: found 'bare -Infinity', {STANDARD_JSON}"
    # What the kit writes for non-finite numbers (the format's strings) reads back unchanged.
    out = tmp_path / "c.json"
    dump_json(Correctness(float("inf"), float("nan"), extra={"spread": float("-inf")}), out)
    written = json.loads(out.read_text(), parse_constant=pytest.fail)  # standard JSON only
    assert written["max_absolute_error"] == "NaN" and written["extra"]["spread"] == "-Infinity"
    back = load_json(out, Correctness)
    assert (
        back.max_relative_error == float("inf")
        and back.max_absolute_error != back.max_absolute_error
    )
    assert back.extra == {"spread": "-Infinity"}
    assert load_json(out, Correctness).to_dict() == back.to_dict()


def test_deeply_nested_json(make_dataset, tmp_path):
    root = make_dataset()
    deep = "[" * 100_000 + "]" * 100_000
    (root / "definitions" / "toy_add.json").write_text(deep)
    assert _error_of(root) == f"{root / 'definitions' / 'toy_add.json'}: {TOO_DEEP}"
    root = make_dataset()
    wl = root / "workloads" / "toy_add.jsonl"
    wl.write_text(wl.read_text() + deep + "\n")
    with pytest.raises(SchemaError) as info:
        list(iter_jsonl(wl))
    assert str(info.value) == f"{wl}:2: {TOO_DEEP}"
    done = run_cli(["report", "summary", "--local", str(root)], cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, f"error: {wl}:2: {TOO_DEEP}\n")


def test_solution_sources_nul_long_name_file_and_folder(tmp_path):
    cases = [
        (
            "a\x00b.py",
            "found 'a\\x00b.py', expected a relative path inside the solution (no "
            "leading '/', no '..', no empty parts, no NUL byte)",
        ),
        ("k/" + "x" * 300 + ".py", None),
        (
            "a",
            "found 'a', expected a file name that no other source uses as a folder ('a/b.py' "
            "puts a file inside it; rename one of the two)",
        ),
    ]
    for path, message in cases:
        data = solution()
        data["sources"] += [{"path": path, "content": "x = 1\n"}]
        if path == "a":
            data["sources"].append({"path": "a/b.py", "content": "y = 2\n"})
        with pytest.raises(SchemaError) as info:
            Solution.from_dict(data)
        text = str(info.value)
        assert text.startswith("sources[1].path: found ")
        if message is not None:
            assert text == f"sources[1].path: {message}"
        else:
            assert text.endswith(
                "expected file and folder names of at most 255 bytes (shorten "
                "xxxxxxxxxxxxxxxxxxxx...)"
            )
    # A 300-character solution *name* is fine: the dataset's file name is cut and made unique.
    ts = TraceSet.from_path(_empty_dataset(tmp_path))
    ts.add_solution(Solution.from_dict({**solution(), "name": "n" * 300}))
    (written,) = (tmp_path / "empty" / "solutions").rglob("*.json")
    assert len(written.name) <= 110 and written.parent.name == "toy_add"
    assert Solution.from_dict(json.loads(written.read_text())).name == "n" * 300


def _empty_dataset(tmp_path: Path) -> Path:
    root = tmp_path / "empty"
    (root / "definitions").mkdir(parents=True)
    return root
