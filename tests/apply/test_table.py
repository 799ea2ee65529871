"""ApplyTable: winners per key, the overall best, and the on-disk cache keyed by digest."""

from __future__ import annotations

import json

import pytest

from fib_core.apply import ApplyConfig, ApplyKey, ApplyRuntime, ApplyTable, table_digest
from fib_core.apply import table as table_mod

from .conftest import DEF_NAME, toy_trace


def test_build_keeps_the_fastest_trusted_solution_per_key(toy_set):
    table = ApplyTable.build(toy_set(), ApplyConfig())
    routes = table.definitions[DEF_NAME]
    assert {k.axes: s for k, s in routes.routes.items()} == {
        (("n", 1),): "plus_one",
        (("n", 2),): "plus_one",
        (("n", 8),): "plus_two",
    }
    assert routes.latency_ms[ApplyKey(axes=(("n", 8),))] == 0.25
    assert routes.best == "plus_one"
    assert table.lookup(DEF_NAME, ApplyKey(axes=(("n", 5),))) is None
    assert table.lookup("other", ApplyKey()) is None


def test_a_definition_without_trusted_traces_has_no_routes(toy_set):
    table = ApplyTable.build(toy_set([toy_trace("plus_one", 1, 0.1, abs_err=1.0)]), ApplyConfig())
    assert table.definitions == {}


def test_second_load_reads_the_cache_without_rebuilding(toy_set, tmp_path, monkeypatch):
    ts = toy_set()
    first = ApplyTable.load_or_build(ts, ApplyConfig(), tmp_path)
    assert not first.from_cache
    files = list((tmp_path / "apply").glob("table-*.json"))
    assert [f.name for f in files] == [f"table-{first.digest}.json"]

    def no_build(*a, **k):
        raise AssertionError("rebuilt despite a cached table")

    monkeypatch.setattr(ApplyTable, "build", classmethod(no_build))
    second = ApplyTable.load_or_build(ts, ApplyConfig(), tmp_path)
    assert second.from_cache
    assert second.definitions[DEF_NAME].routes == first.definitions[DEF_NAME].routes
    assert second.definitions[DEF_NAME].best == first.definitions[DEF_NAME].best


def test_digest_changes_with_config_traces_and_solutions(toy_set):
    ts = toy_set()
    base = table_digest(ts, ApplyConfig())
    assert table_digest(toy_set(), ApplyConfig()) == base  # same content, same digest
    assert table_digest(ts, ApplyConfig(max_atol=0.5)) != base
    ts2 = toy_set()
    ts2.add_traces([toy_trace("plus_two", 1, 0.01)])
    assert table_digest(ts2, ApplyConfig()) != base
    ts3 = toy_set()
    ts3.get_solution("plus_two").sources[0].content += "# changed\n"
    assert table_digest(ts3, ApplyConfig()) != base


def test_runtime_uses_the_cache_dir_and_a_corrupt_cache_is_rebuilt(toy_set, tmp_path):
    ts = toy_set()
    rt = ApplyRuntime(ts, ApplyConfig(aot_ratio=0.0), cache_dir=tmp_path)
    path = table_mod.cache_path(rt.table.digest, tmp_path)
    assert path.is_file() and not rt.table.from_cache
    assert ApplyRuntime(ts, ApplyConfig(aot_ratio=0.0), cache_dir=tmp_path).table.from_cache
    path.write_text("{not json")
    with pytest.warns(UserWarning, match="rebuilding"):
        table = ApplyTable.load_or_build(ts, ApplyConfig(aot_ratio=0.0), tmp_path)
    assert not table.from_cache and json.loads(path.read_text())["digest"] == table.digest


def test_default_cache_is_under_the_kit_cache_dir(toy_set, tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "kitcache"))
    table = ApplyTable.load_or_build(toy_set(), ApplyConfig())
    assert (tmp_path / "kitcache" / "apply" / f"table-{table.digest}.json").is_file()


def test_rebuild_picks_up_new_traces(toy_set):
    ts = toy_set()
    rt = ApplyRuntime(ts, ApplyConfig(aot_ratio=0.0))
    assert rt.table.lookup(DEF_NAME, ApplyKey(axes=(("n", 5),))) is None
    ts.add_traces([toy_trace("plus_two", 5, 0.01)])
    rt.rebuild()
    assert rt.table.lookup(DEF_NAME, ApplyKey(axes=(("n", 5),))) == "plus_two"
