"""TraceSet: folder layout, lookups, adds, backups, blobs, and the errors a dataset can raise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fib_core.data import (
    DatasetError,
    DatasetNotFoundError,
    Definition,
    Solution,
    Trace,
    TraceSet,
    UnknownDefinitionError,
)
from fib_core.errors import FibError, LfsPointerError, SchemaError


def _write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, list):
        path.write_text("".join(json.dumps(r) + "\n" for r in data))
    else:
        path.write_text(json.dumps(data, indent=2))
    return path


@pytest.fixture
def dataset(tmp_path, build, def_name) -> Path:
    root = tmp_path / "ds"
    _write(root / "definitions" / "toy" / f"{def_name}.json", build.definition())
    _write(root / "solutions" / "alice" / "a.json", build.solution("sol-a", "alice"))
    _write(root / "solutions" / "baseline" / "b.json", build.solution("base", "baseline"))
    _write(root / "workloads" / "toy" / f"{def_name}.jsonl",
           [build.trace(solution=None, workload_uuid=u) for u in ("w-1", "w-2")])
    return root


def test_from_path_reads_every_folder(dataset, def_name):
    ts = TraceSet.from_path(dataset)
    assert ts.root == dataset
    assert list(ts.definitions) == [def_name]
    assert sorted(s.name for s in ts.solutions[def_name]) == ["base", "sol-a"]
    assert [w.workload.uuid for w in ts.workloads[def_name]] == ["w-1", "w-2"]
    assert ts.traces == {}
    assert ts.get_solution("sol-a").author == "alice"
    assert ts.get_solution("nope") is None


def test_both_trace_layouts_load(dataset, build, def_name):
    _write(dataset / "traces" / "toy" / f"{def_name}.jsonl",  # 0.1.x layout
           [build.trace("base", "w-1", latency=2.0)])
    _write(dataset / "traces" / "alice" / "toy" / f"{def_name}.jsonl",  # author layout
           [build.trace("sol-a", "w-1", latency=1.0), build.trace("sol-a", "w-2", latency=1.5)])
    ts = TraceSet.from_path(dataset)
    assert sorted((t.solution, t.workload.uuid) for t in ts.traces[def_name]) == [
        ("base", "w-1"), ("sol-a", "w-1"), ("sol-a", "w-2")]


def test_path_resolution_order(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_DATASET_PATH", str(dataset))
    assert TraceSet.from_path().root == dataset
    monkeypatch.delenv("FIB_DATASET_PATH")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(DatasetNotFoundError, match=r"\.cache/flashinfer_bench/dataset"):
        TraceSet.from_path()


def test_missing_folder_is_file_not_found(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError) as info:
        TraceSet.from_path(missing)
    assert isinstance(info.value, FibError)
    assert str(info.value).startswith(f"{missing}: dataset folder not found (")
    assert "FIB_DATASET_PATH" in str(info.value)


def test_folder_without_dataset_folders(tmp_path):
    (tmp_path / "mlsys26" / "definitions").mkdir(parents=True)
    with pytest.raises(DatasetNotFoundError) as info:
        TraceSet.from_path(tmp_path)  # one level too high
    assert str(info.value) == (
        f"{tmp_path}: dataset folders (definitions/, solutions/, workloads/, traces/) not found "
        "(is this the dataset root? point at the folder that holds definitions/)")
    assert TraceSet.from_path(tmp_path / "mlsys26").definitions == {}


def test_duplicate_definition_names(dataset, build, def_name):
    copy = _write(dataset / "definitions" / "other" / "copy.json", build.definition())
    with pytest.raises(ValueError) as info:
        TraceSet.from_path(dataset)
    assert isinstance(info.value, SchemaError)
    first = dataset / "definitions" / "toy" / f"{def_name}.json"
    assert str(info.value) == (
        f"{first}: name: found '{def_name}', expected a definition name used once in the "
        f"dataset (also declared by {copy}; remove one)")


def test_duplicate_solution_names(dataset, build):
    dup = _write(dataset / "solutions" / "zed" / "z.json", build.solution("sol-a", "zed"))
    first = dataset / "solutions" / "alice" / "a.json"
    with pytest.raises(ValueError) as info:
        TraceSet.from_path(dataset)
    assert str(info.value) == (f"{dup}: name: found 'sol-a', expected a solution name used once "
                               f"in the dataset (also used by {first}; rename one)")


def test_workload_must_cover_var_axes_and_known_inputs(dataset, build, def_name):
    bad = build.trace(solution=None, workload_uuid="w-9")
    del bad["workload"]["axes"]["pages"]
    path = _write(dataset / "workloads" / "toy" / f"{def_name}.jsonl",
                  [build.trace(solution=None), bad])
    with pytest.raises(SchemaError, match=rf"^{path}:2: workload\.axes\.pages: a value for var axis "
                                          r"'pages' \(workload w-9\)"):
        TraceSet.from_path(dataset)
    bad = build.trace(solution=None, workload_uuid="w-9")
    bad["workload"]["inputs"]["bias"] = {"type": "random"}
    _write(path, [bad])
    with pytest.raises(SchemaError, match=r"workload\.inputs: found 'bias', expected an input of"):
        TraceSet.from_path(dataset)


def test_add_traces_appends_in_author_layout_and_reloads(dataset, build, def_name):
    ts = TraceSet.from_path(dataset)
    ts.add_traces([Trace.from_dict(build.trace("sol-a", "w-1")),
                   Trace.from_dict(build.trace("base", "w-1", latency=3.0))])
    ts.add_traces([Trace.from_dict(build.trace("sol-a", "w-2", status="RUNTIME_ERROR"))])
    alice = dataset / "traces" / "alice" / "toy" / f"{def_name}.jsonl"
    base = dataset / "traces" / "baseline" / "toy" / f"{def_name}.jsonl"
    assert len(alice.read_text().splitlines()) == 2 and len(base.read_text().splitlines()) == 1
    again = TraceSet.from_path(dataset)
    assert len(again.traces[def_name]) == len(ts.traces[def_name]) == 3
    assert {t.solution for t in again.traces[def_name]} == {"sol-a", "base"}


def test_add_errors(dataset, build):
    ts = TraceSet.from_path(dataset)
    with pytest.raises(UnknownDefinitionError, match=r"^definition 'nope' is not in the dataset "
                                                     r"\(known: toy_scale_t\)$"):
        ts.add_traces([Trace.from_dict(build.trace(definition="nope"))])
    with pytest.raises(DatasetError, match="use add_workload_traces"):
        ts.add_traces([Trace.from_dict(build.trace(solution=None))])
    with pytest.raises(DatasetError, match="use add_traces"):
        ts.add_workload_traces([Trace.from_dict(build.trace())])


def test_in_memory_set_never_touches_disk(tmp_path, build, def_name, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ts = TraceSet()
    ts.add_definition(Definition.from_dict(build.definition()))
    ts.add_solution(Solution.from_dict(build.solution()))
    ts.add_workload_traces([Trace.from_dict(build.trace(solution=None))])
    ts.add_traces([Trace.from_dict(build.trace())])
    assert list(tmp_path.iterdir()) == []
    assert len(ts.traces[def_name]) == len(ts.workloads[def_name]) == 1
    assert ts.to_dict()["solutions"][def_name][0]["name"] == "sol-a"
    with pytest.raises(DatasetError, match="no root folder"):
        ts.backup_traces()
    with pytest.raises(SchemaError, match="a solution name used once"):
        ts.add_solution(Solution.from_dict(build.solution()))


def test_added_objects_reload_from_a_new_root(tmp_path, build, def_name):
    ts = TraceSet(root=tmp_path / "new")
    ts.add_definition(Definition.from_dict(build.definition()))
    ts.add_solution(Solution.from_dict(build.solution(author="Al Ice/evil")))
    ts.add_workload_traces([Trace.from_dict(build.trace(solution=None))])
    ts.add_traces([Trace.from_dict(build.trace())])
    assert (tmp_path / "new" / "traces" / "Al_Ice_evil" / "toy" / f"{def_name}.jsonl").is_file()
    assert TraceSet.from_path(tmp_path / "new").to_dict() == ts.to_dict()


def test_backup_traces_moves_results_aside(dataset, build, def_name):
    ts = TraceSet.from_path(dataset)
    ts.add_traces([Trace.from_dict(build.trace())])
    backup = ts.backup_traces()
    assert backup.parent == dataset and backup.name.startswith("traces_bak_")
    assert (backup / "alice" / "toy" / f"{def_name}.jsonl").is_file()
    assert list((dataset / "traces").iterdir()) == [] and ts.traces == {}
    second = ts.backup_traces()
    assert second != backup and second.is_dir()
    assert TraceSet.from_path(dataset).traces == {}  # backups are not read as traces


def test_filter_and_best_trace(dataset, build, def_name):
    ts = TraceSet.from_path(dataset)
    ts.add_traces([Trace.from_dict(t) for t in (
        build.trace("sol-a", "w-1", latency=1.0, ref_latency=4.0),           # speedup 4
        build.trace("base", "w-1", latency=2.0, ref_latency=4.0),            # speedup 2
        build.trace("sol-a", "w-2", latency=0.5, ref_latency=4.0, abs_=0.5),  # too inaccurate
        build.trace("sol-a", "w-2", status="INCORRECT_NUMERICAL"),
    )])
    kept = ts.filter_traces(def_name)
    assert sorted(t.evaluation.performance.speedup_factor for t in kept) == [2.0, 4.0]
    assert len(ts.filter_traces(def_name, atol=1.0)) == 3
    assert ts.get_best_trace(def_name).evaluation.performance.speedup_factor == 4.0
    best_loose = ts.get_best_trace(def_name, max_abs_error=1.0)
    assert best_loose.evaluation.performance.speedup_factor == 8.0
    assert ts.get_best_trace(def_name, axes={"tokens": 4, "pages": 2}) is not None
    assert ts.get_best_trace(def_name, axes={"tokens": 5, "pages": 2}) is None
    assert ts.get_best_trace("unknown_def") is None


def test_blob_round_trip_and_errors(dataset, def_name):
    torch = pytest.importorskip("torch")
    ts = TraceSet.from_path(dataset)
    tensors = {"t": torch.arange(6, dtype=torch.int32).reshape(2, 3)[:, 1:]}  # non-contiguous
    rel = ts.add_workload_blob_tensor(def_name, "w-1", tensors)
    assert rel == f"blob/workloads/toy/{def_name}/{def_name}_w-1.safetensors"
    for spelled in (rel, "./" + rel, str(dataset / rel)):
        loaded = ts.get_workload_blob_tensor(spelled)
        assert torch.equal(loaded["t"], tensors["t"]) and loaded["t"].device.type == "cpu"
    with pytest.raises(DatasetError, match="already exists"):
        ts.add_workload_blob_tensor(def_name, "w-1", tensors)
    with pytest.raises(FileNotFoundError, match="workload blob not found"):
        ts.get_workload_blob_tensor("blob/none.safetensors")
    with pytest.raises(DatasetError, match="no root folder"):
        TraceSet().add_workload_blob_tensor(def_name, "w-1", tensors)


def test_lfs_pointer_blob_says_what_to_run(dataset):
    pointer = dataset / "blob" / "x.safetensors"
    pointer.parent.mkdir(parents=True)
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 99\n")
    with pytest.raises(LfsPointerError, match=r"x\.safetensors: is a git-LFS pointer.*git lfs pull"):
        TraceSet.from_path(dataset).get_workload_blob_tensor("./blob/x.safetensors")


def test_corrupt_blob_is_a_schema_error(dataset):
    pytest.importorskip("safetensors")
    junk = dataset / "blob" / "junk.safetensors"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(SchemaError, match=r"junk\.safetensors: found .*expected a safetensors"):
        TraceSet.from_path(dataset).get_workload_blob_tensor("blob/junk.safetensors")
