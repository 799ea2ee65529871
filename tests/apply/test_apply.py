"""apply routes each call to the solution that won at its shapes, else to the original."""

from __future__ import annotations

import pytest
import torch

from fib_core.apply import (
    ApplyConfig,
    ApplyConfigError,
    ApplyKey,
    ApplyKeyFactory,
    ApplyMissError,
    ApplyRuntime,
    AxesOnlyKeyBuilder,
    apply,
    disable_apply,
    enable_apply,
    get_apply_hook,
    get_runtime,
    set_apply_hook,
    set_runtime,
)
from fib_core.data import EvaluationStatus

from .conftest import DEF_NAME, toy_trace


@apply(DEF_NAME)
def shift(x):
    return x + 0  # the model's own code


def _x(n: int) -> torch.Tensor:
    return torch.zeros(n, 4)


def _enable(ts, **cfg):
    runtime = ApplyRuntime(ts, ApplyConfig(**cfg))
    set_runtime(runtime)
    return runtime


def test_each_solution_runs_where_it_won_and_the_original_elsewhere(toy_set):
    _enable(toy_set())
    assert shift(_x(1)).unique().tolist() == [1.0]  # plus_one won at n=1 (DPS, allocated)
    assert shift(_x(2)).unique().tolist() == [1.0]
    assert shift(_x(8)).unique().tolist() == [2.0]  # plus_two won at n=8 (value-returning)
    assert shift(_x(5)).unique().tolist() == [0.0]  # nobody recorded: the original
    assert shift(x=_x(8)).shape == (8, 4)  # keyword call routes the same way
    rt = get_runtime()
    assert rt.stats["hits"] == 4 and rt.stats["misses"] == 1


def test_no_runtime_means_the_original_function():
    assert get_runtime() is None
    assert shift(_x(1)).unique().tolist() == [0.0]


def test_use_def_best_runs_the_overall_winner_on_a_miss(toy_set):
    _enable(toy_set(), on_miss_policy="use_def_best")
    # plus_one wins two keys, plus_two one: plus_one is the definition's best
    assert shift(_x(5)).unique().tolist() == [1.0]


def test_resolver_picks_the_definition_from_the_arguments(toy_set):
    _enable(toy_set())
    calls = []

    def resolver(x):
        calls.append(x.shape[0])
        return DEF_NAME if x.shape[0] < 100 else "unknown_definition"

    @apply(resolver)
    def f(x):
        return x - 1

    assert f(_x(8)).unique().tolist() == [2.0]
    assert calls == [8]


def test_function_mode_uses_fallback_on_a_miss_and_errors_without_one(toy_set):
    def fallback(x):
        return x - 5

    # no runtime: fallback, or an error naming what to do
    assert apply(DEF_NAME, runtime_kwargs={"x": _x(1)}, fallback=fallback).unique().tolist() == [
        -5.0
    ]
    with pytest.raises(ApplyMissError, match="enable_apply"):
        apply(DEF_NAME, runtime_kwargs={"x": _x(1)})
    _enable(toy_set())
    assert apply(DEF_NAME, runtime_kwargs={"x": _x(1)}, fallback=fallback).unique().tolist() == [
        1.0
    ]
    assert apply(DEF_NAME, runtime_kwargs={"x": _x(5)}, fallback=fallback).unique().tolist() == [
        -5.0
    ]
    with pytest.raises(ApplyMissError):
        apply(DEF_NAME, runtime_kwargs={"x": _x(5)})


def test_caller_provided_outputs_are_written(toy_set):
    _enable(toy_set())
    y = torch.full((8, 4), -1.0)
    out = apply(DEF_NAME, runtime_kwargs={"x": _x(8), "y": y})
    assert out is y and y.unique().tolist() == [2.0]  # value-returning result copied in


def test_tolerance_filtering_drops_loose_and_failed_traces(toy_set):
    traces = [
        toy_trace("plus_one", 1, 0.5),
        toy_trace("plus_two", 1, 0.1, abs_err=0.5),  # fastest but too inaccurate
        toy_trace("plus_two", 2, 0.1, rel_err=1e-3),  # within atol, beyond the default rtol
        toy_trace("plus_one", 2, 0.5),
        toy_trace("plus_two", 8, 0.01, status=EvaluationStatus.INCORRECT_NUMERICAL, abs_err=9),
        toy_trace("plus_one", 8, 0.5),
    ]
    _enable(toy_set(traces))
    for n in (1, 2, 8):
        assert shift(_x(n)).unique().tolist() == [1.0], n
    # a looser rtol lets plus_two win at n=2
    _enable(toy_set(traces), max_rtol=1e-2)
    assert shift(_x(2)).unique().tolist() == [2.0]


def test_traces_of_unknown_solutions_are_ignored(toy_set):
    ts = toy_set(solutions=("plus_one", "plus_two"))
    ts.add_traces([toy_trace("plus_two", 5, 0.01)])
    ts.solutions[DEF_NAME] = [s for s in ts.solutions[DEF_NAME] if s.name != "plus_two"]
    ts._solution_by_name.pop("plus_two")
    _enable(ts)
    assert shift(_x(5)).unique().tolist() == [0.0]
    assert shift(_x(8)).unique().tolist() == [1.0]  # plus_one is the only one left at n=8


def test_aot_ratio_builds_the_asked_share_up_front(toy_set):
    rt = ApplyRuntime(toy_set(), ApplyConfig(aot_ratio=1.0))
    assert rt.built_solutions == ["plus_one", "plus_two"]
    rt = ApplyRuntime(toy_set(), ApplyConfig(aot_ratio=0.5))
    assert rt.built_solutions == ["plus_one"]  # the solution winning the most keys first
    rt = ApplyRuntime(toy_set(), ApplyConfig(aot_ratio=0.0))
    assert rt.built_solutions == []
    set_runtime(rt)
    shift(_x(8))
    assert rt.built_solutions == ["plus_two"]  # built lazily, on first use
    shift(_x(8))
    assert rt.stats["builds"] == 1


def test_a_solution_that_fails_to_build_misses(toy_set, monkeypatch):
    from fib_core.data import Solution

    ts = toy_set()
    bad = Solution.from_dict({**ts.get_solution("plus_two").to_dict()})
    bad.spec.entry_point = "main.py::missing"
    ts.solutions[DEF_NAME] = [ts.get_solution("plus_one"), bad]
    ts._solution_by_name["plus_two"] = bad
    rt = _enable(ts, aot_ratio=0.0)
    with pytest.warns(UserWarning, match="plus_two"):
        assert shift(_x(8)).unique().tolist() == [0.0]
    assert shift(_x(1)).unique().tolist() == [1.0]
    assert rt.built_solutions == ["plus_one"]


def test_enable_apply_handle_is_callable_and_restores_on_exit(toy_set, tmp_path):
    outer = _enable(toy_set())
    ts = toy_set()
    root = tmp_path / "ds"
    ts_on_disk = type(ts)(root=root)
    for d in ts.definitions.values():
        ts_on_disk.add_definition(d)
    for sols in ts.solutions.values():
        for s in sols:
            ts_on_disk.add_solution(s)
    ts_on_disk.add_traces([t for ts_ in ts.traces.values() for t in ts_])
    with enable_apply(root, ApplyConfig(on_miss_policy="use_def_best")) as handle:
        assert get_runtime() is handle.runtime and handle.runtime is not outer
        assert handle(DEF_NAME, runtime_kwargs={"x": _x(5)}).unique().tolist() == [1.0]
    assert get_runtime() is outer
    handle = enable_apply(root)
    assert shift(_x(8)).unique().tolist() == [2.0]
    disable_apply()
    assert get_runtime() is None
    assert shift(_x(8)).unique().tolist() == [0.0]


def test_enable_apply_reads_the_dataset_environment_variable(toy_set, tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_DATASET_PATH", str(tmp_path / "missing"))
    from fib_core.data import DatasetNotFoundError

    with pytest.raises(DatasetNotFoundError, match="missing"):
        enable_apply()


def test_hook_sees_every_call_with_bound_arguments(toy_set):
    seen = []
    assert set_apply_hook(lambda name, kw: seen.append((name, sorted(kw)))) is None
    shift(_x(1))
    _enable(toy_set())
    shift(x=_x(2))
    assert seen == [(DEF_NAME, ["x"]), (DEF_NAME, ["x"])]
    assert get_apply_hook() is not None


@apply(DEF_NAME[:-1])  # a typo in the definition's name
def shift_typo(x):
    return x + 0


def test_an_unknown_definition_is_named_once_with_the_close_one(toy_set):
    _enable(toy_set())
    with pytest.warns(UserWarning, match=f"no definition is named {DEF_NAME[:-1]!r}.*did you mean {DEF_NAME!r}"):
        assert shift_typo(_x(1)).unique().tolist() == [0.0]  # the original runs
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shift_typo(_x(1))  # said once
        assert known_elsewhere(_x(1)).unique().tolist() == [0.0]  # a real definition: no word


@apply("gdn_prefill_qk4_v8_d128_k_last")  # a kit definition this dataset has no traces for
def known_elsewhere(x):
    return x + 0


@apply(DEF_NAME)
def shift_renamed(y):  # the definition's input is x
    return y + 0


def test_a_parameter_named_unlike_the_input_is_named_with_the_fix(toy_set):
    from fib_core.apply import ApplyKeyError

    _enable(toy_set())
    with pytest.raises(ApplyKeyError, match="the call has no argument 'x' \\(it has: y\\); name the"):
        shift_renamed(_x(1))


def test_wrong_argument_types_are_named():
    with pytest.raises(TypeError, match="pass an ApplyConfig"):
        ApplyRuntime(None, {"max_atol": 1})
    with pytest.raises(TypeError, match="the dataset is a int"):
        ApplyRuntime(5)


def test_config_is_validated():
    for bad in (
        {"max_atol": -1},
        {"max_rtol": "x"},
        {"aot_ratio": 1.5},
        {"aot_ratio": float("nan")},
        {"on_miss_policy": "best"},
    ):
        with pytest.raises(ApplyConfigError, match="ApplyConfig"):
            ApplyConfig(**bad)
    with pytest.raises(ValueError):
        ApplyConfig(aot_ratio=-0.1)
    assert ApplyConfig(max_atol=1).max_atol == 1.0


def test_keys_round_trip_and_builders_are_registered_per_op_type(toy_set):
    key = ApplyKey(axes=(("n", 3),), feats=(("avg", 1.5),))
    assert ApplyKey.from_encoded(key.encode) == key and hash(key) == hash(
        ApplyKey.from_encoded(key.encode)
    )
    definition = toy_set().definitions[DEF_NAME]
    builder = ApplyKeyFactory.specialize(definition)
    assert isinstance(builder, AxesOnlyKeyBuilder)
    assert builder.build_from_runtime({"x": _x(3)}) == ApplyKey(axes=(("n", 3),))

    class ByFirstValue(AxesOnlyKeyBuilder):
        def build_from_runtime(self, kw):
            return ApplyKey(axes=self._read_axes(kw), feats=(("first", float(kw["x"][0, 0])),))

        def build_from_workload(self, workload):
            return ApplyKey(
                axes=super().build_from_workload(workload).axes, feats=(("first", 0.0),)
            )

    ApplyKeyFactory.register("toy", ByFirstValue)
    try:
        _enable(toy_set())
        assert shift(_x(8)).unique().tolist() == [2.0]  # first value 0.0: matches
        assert shift(_x(8) + 1).unique().tolist() == [1.0]  # first value 1.0: the original
    finally:
        ApplyKeyFactory.unregister("toy")
