"""JSON/JSONL loading with located errors, atomic dumps, and crash-safe appends."""

from __future__ import annotations

import json
import os
import warnings

import pytest

from fib_core.data import Definition, Trace, TruncatedRecordWarning
from fib_core.data.json_io import (
    append_jsonl,
    dump_json,
    dump_jsonl,
    is_truncated_json,
    load_json,
    load_jsonl,
)
from fib_core.errors import LfsPointerError, SchemaError


def _write_lines(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_json_errors_name_file_line_and_field(tmp_path, build):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{\n  "name": "x",\n  "op_type": oops\n}\n')
    with pytest.raises(SchemaError) as info:
        load_json(bad_json, Definition)
    assert str(info.value).startswith(f"{bad_json}:3: found 'Expecting value at column 14', "
                                      "expected valid JSON")

    raw = build.definition()
    raw["inputs"]["x"]["dtype"] = "half"
    bad_field = tmp_path / "def.json"
    bad_field.write_text(json.dumps(raw))
    with pytest.raises(SchemaError, match=rf"^{bad_field}: inputs\.x\.dtype: found 'half'"):
        load_json(bad_field, Definition)


def test_jsonl_errors_name_the_line(tmp_path, build):
    path = tmp_path / "w.jsonl"
    bad = build.trace(solution=None, workload_uuid="w-3")
    bad["workload"]["axes"]["tokens"] = -1
    _write_lines(path, [build.trace(solution=None), build.trace(solution=None), bad])
    with pytest.raises(SchemaError) as info:
        load_jsonl(path, Trace)
    assert str(info.value) == (f"{path}:3: workload.axes.tokens: found -1, expected an integer >= 0")

    path.write_text(json.dumps(build.trace(solution=None)) + "\n\n" + '{"a": 1}}\n')
    with pytest.raises(SchemaError, match=rf"^{path}:3: found 'Extra data at column 9', "
                                          "expected one JSON object per line"):
        load_jsonl(path, Trace)


def test_blank_lines_are_ignored(tmp_path, build):
    path = tmp_path / "w.jsonl"
    path.write_text("\n" + json.dumps(build.trace(solution=None)) + "\n  \n")
    assert len(load_jsonl(path, Trace)) == 1


def test_lfs_pointer_instead_of_json(tmp_path):
    path = tmp_path / "def.json"
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n")
    with pytest.raises(LfsPointerError, match="git lfs pull"):
        load_json(path, Definition)
    with pytest.raises(LfsPointerError):
        load_jsonl(path, Trace)


@pytest.mark.parametrize(
    ("text", "truncated"),
    [('{"a": 1', True), ('{"a": "x}', True), ('{"a": [1, {"b": 2}', True),
     ('{"a": "\\"}"', True), ('{"a": 1}}', False), ("nonsense", False), ('{"a": 1}', False)],
)
def test_truncation_detector(text, truncated):
    assert is_truncated_json(text) is truncated


def test_interrupted_append_keeps_every_complete_record(tmp_path, build):
    path = tmp_path / "traces" / "t.jsonl"
    first = [Trace.from_dict(build.trace(workload_uuid=f"w-{i}")) for i in range(3)]
    append_jsonl(path, first)
    # A writer dies mid-record: the file now ends in half a line.
    full = json.dumps(build.trace(workload_uuid="w-lost"))
    with path.open("a") as fh:
        fh.write(full[: len(full) // 2])
    with pytest.warns(TruncatedRecordWarning, match=r"t\.jsonl:4: skipped an incomplete record"):
        assert [t.workload.uuid for t in load_jsonl(path, Trace)] == ["w-0", "w-1", "w-2"]

    # The next append starts on a fresh line, so it neither merges with nor loses to the stub.
    later = [Trace.from_dict(build.trace(workload_uuid=f"w-{i}")) for i in (5, 6)]
    append_jsonl(path, later)
    assert path.read_text().endswith("\n")
    with pytest.warns(TruncatedRecordWarning, match=r":4: skipped"):
        loaded = load_jsonl(path, Trace)
    assert [t.workload.uuid for t in loaded] == ["w-0", "w-1", "w-2", "w-5", "w-6"]
    assert loaded[0] == first[0] and loaded[-1] == later[-1]


def test_append_to_clean_file_adds_no_blank_line(tmp_path, build):
    path = tmp_path / "t.jsonl"
    append_jsonl(path, [Trace.from_dict(build.trace())])
    append_jsonl(path, [Trace.from_dict(build.trace())])
    append_jsonl(path, [])
    assert path.read_text().count("\n") == 2 and "\n\n" not in path.read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_jsonl(path, Trace)) == 2


def test_dump_json_is_atomic(tmp_path, build):
    path = tmp_path / "d" / "def.json"
    definition = Definition.from_dict(build.definition())
    dump_json(definition, path)
    assert load_json(path, Definition) == definition
    before = path.read_text()
    with pytest.raises(TypeError):
        dump_json({"not json": object()}, path)
    assert path.read_text() == before
    assert os.listdir(path.parent) == ["def.json"]  # no temp file left behind


def test_dump_jsonl_replaces_the_file(tmp_path, build):
    path = tmp_path / "w.jsonl"
    records = [Trace.from_dict(build.trace(solution=None, workload_uuid=f"w-{i}"))
               for i in range(4)]
    dump_jsonl(records, path)
    dump_jsonl(records[:2], path)
    assert load_jsonl(path, Trace) == records[:2]
