"""The settings table: every place a benchmark setting is spelled is built from it, and one
merge step decides which value a run uses."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from pathlib import Path

import pytest

from fib_core.bench import settings as S
from fib_core.bench.config import BenchmarkConfig
from fib_core.errors import ConfigError
from fib_core.project.config import SCHEMA, config_from_dict


def test_every_row_is_a_config_field_with_the_same_default() -> None:
    fields = {f.name: f for f in dataclasses.fields(BenchmarkConfig)}
    for setting in S.SETTINGS:
        assert setting.name in fields, setting.name
        assert getattr(BenchmarkConfig(), setting.name) == setting.default, setting.name
    # and only the two non-setting fields are left out of the table
    assert set(fields) - set(S.BY_NAME) == {"build_options", "extra"}


def test_config_toml_benchmark_keys_are_the_tables() -> None:
    keys = SCHEMA["benchmark"]
    assert list(keys) == [s.key for s in S.SETTINGS if s.key]
    assert keys["trials"].doc == S.by_key("trials").help
    assert keys["timing_method"].choices == ("auto", "cupti", "profiler", "events")


def _kit(benchmark: dict) -> object:
    data = {
        "solution": {"name": "s", "definition": "d", "author": "a"},
        "build": {"language": "triton", "entry_point": "kernel.py::run"},
        "benchmark": benchmark,
    }
    return config_from_dict(data, Path("config.toml"))


@pytest.mark.parametrize(
    ("benchmark", "needle"),
    [
        ({"iterations": 0}, "[benchmark] iterations = 0 must be an integer >= 1"),
        ({"timeout": -5}, "[benchmark] timeout = -5 must be a number > 0"),
        ({"required_matched_ratio": 1.5}, "required_matched_ratio = 1.5 must be a number in"),
        ({"seed": -1}, "[benchmark] seed = -1 must be an integer >= 0"),
    ],
)
def test_a_value_out_of_range_is_one_line_naming_the_file(benchmark: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        _kit(benchmark)
    message = str(info.value)
    assert message.startswith("config.toml: ") and needle in message and "\n" not in message


def test_config_values_by_key_and_unset_ones_are_none() -> None:
    cfg = _kit({"trials": 5, "timeout": 60})
    assert cfg.benchmark.trials == 5 and cfg.benchmark.warmup is None
    assert cfg.benchmark.given() == {"trials": 5, "timeout": 60}


def test_merge_order_defaults_definition_cpu_config_flags() -> None:
    definition = {"warmup_runs": 1, "iterations": 5, "isolated": False}
    merged = S.merge(
        definition=definition,
        cpu=True,
        config={"iterations": 20, "timeout": 60},
        flags={"warmup_runs": 3, "seed": None},
    )
    assert merged["warmup_runs"] == 3  # flag over everything
    assert merged["iterations"] == 20  # config.toml over the CPU counts and eval.toml
    assert merged["num_trials"] == 1 and merged["num_input_sets"] == 2  # the CPU smoke layer
    assert merged["timeout_seconds"] == 60.0 and isinstance(merged["timeout_seconds"], float)
    assert merged["isolated"] is False  # eval.toml, nothing above it
    assert "seed" not in merged  # a flag that was not given
    assert "atol" not in S.merge(definition=definition)  # built-in defaults stay BenchmarkConfig's
    BenchmarkConfig(**merged)


def test_merge_refuses_an_unknown_setting() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'warmup'"):
        S.merge(flags={"warmup": 3})


def test_a_bad_flag_value_is_named_as_typed() -> None:
    with pytest.raises(ConfigError, match=r"flag --trials / --num-trials: num_trials = 0; "
                       r"expected an integer >= 1"):
        S.merge(config={"trials": 5}, flags={"num_trials": 0})
    with pytest.raises(ConfigError, match="flag --timeout: timeout_seconds = -5.0"):
        S.merge(flags={"timeout_seconds": -5.0})
    assert S.merge(flags={"num_trials": 2, "timeout_seconds": None}) == {"num_trials": 2}


def _parse(style: str, *argv: str) -> dict:
    parser = argparse.ArgumentParser()
    S.add_flags(parser, style)
    return S.flags_given(parser.parse_args(list(argv)), style)


def test_run_local_flags_land_under_setting_names() -> None:
    got = _parse(
        S.LOCAL, "--warmup", "2", "--trials", "4", "--timeout", "9", "--no-isolated",
        "--timing-method", "events", "--workloads", "batch_size=1", "3f2a", "--device", "cpu",
    )  # fmt: skip
    assert got == {
        "warmup_runs": 2, "num_trials": 4, "timeout_seconds": 9.0, "isolated": False,
        "timing_method": "events", "workloads": ("batch_size=1", "3f2a"), "device": "cpu",
    }  # fmt: skip
    assert _parse(S.LOCAL) == {}
    with pytest.raises(SystemExit):  # run_local offers config.toml's choices only
        _parse(S.LOCAL, "--device", "auto")


def test_each_flag_of_each_style_is_the_tables() -> None:
    for style, attr in ((S.LOCAL, "flag"), (S.CLI, "cli_flag")):
        parser = argparse.ArgumentParser()
        S.add_flags(parser, style)
        flags = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
        wanted = {getattr(s, attr) for s in S.SETTINGS if getattr(s, attr)}
        bools = {f"--no-{f[2:]}" for f in wanted if S.BY_NAME[_name(f, attr)].kind is bool}
        assert flags - {"--help"} == wanted | bools


def _name(flag: str, attr: str) -> str:
    return next(s.name for s in S.SETTINGS if getattr(s, attr) == flag)


def test_modal_options_come_from_the_table() -> None:
    def main(gpu: str = "B200", **settings: object) -> dict:
        return S.modal_flags(settings)

    S.with_modal_options(main)
    params = inspect.signature(main).parameters
    exposed = {n for n in params if n != "gpu"}
    assert exposed == {"warmup", "iterations", "trials", "timeout", "isolated", "workloads"}
    assert all(params[n].default is None for n in exposed)
    assert main.__annotations__["trials"] == (int | None)
    got = main(trials=2, isolated=False, workloads="batch_size=1 3f2a", warmup=None)
    assert got == {"num_trials": 2, "isolated": False, "workloads": ("batch_size=1", "3f2a")}
    assert main(workloads="") == {}


def test_engine_validation_names_the_field_and_what_it_must_be() -> None:
    with pytest.raises(ConfigError, match=r"input_memory_fraction = 0; expected a number in \(0"):
        BenchmarkConfig(input_memory_fraction=0)
    with pytest.raises(ConfigError, match="isolated = 'yes'; expected true or false"):
        BenchmarkConfig(isolated="yes")
    assert BenchmarkConfig(workloads=["abcdef"]).workloads == ("abcdef",)


def test_an_eval_toml_value_out_of_range_names_the_file(tmp_path: Path) -> None:
    from fib_core.bench.grading import eval_settings

    (tmp_path / "range_def.toml").write_text("[local]\niterations = 0\n")
    with pytest.raises(ConfigError) as info:
        eval_settings("range_def", tmp_path)
    assert "range_def.toml: [local] iterations = 0; expected an integer >= 1" in str(info.value)
