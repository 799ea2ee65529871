"""Per-definition evaluation settings: the organizers' flags as data, layered under config/CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.grading import eval_settings
from fib_core.errors import ConfigError
from fib_core.project.config import config_from_dict
from fib_core.project.runflow import RunOptions, make_request

PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
DECODE = "gdn_decode_qk4_v8_d128_k_last"
MOE = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"


def kit_config(definition: str, benchmark: dict | None = None):
    data = {
        "solution": {"name": "s", "definition": definition, "author": "a"},
        "build": {"language": "triton", "entry_point": "kernel.py::run"},
        "benchmark": benchmark or {},
    }
    return config_from_dict(data, Path("config.toml"))


class _Solution:
    def to_dict(self) -> dict:
        return {"name": "s"}


def test_every_embedded_definition_has_a_valid_file() -> None:
    from fib_core.dataset import registry

    names = registry.definitions()
    assert len(names) >= 5
    for name in names:
        assert registry.get(name).settings_path is not None, name
        s = eval_settings(name)
        assert s.source is not None
        BenchmarkConfig(**s.contest_fields())  # every value passes the engine's validation
        BenchmarkConfig(**s.local_fields())


def test_prefill_uses_the_organizers_counts_locally_and_isolation_only_in_contest() -> None:
    s = eval_settings(PREFILL)
    local, contest = s.local_fields(), s.contest_fields()
    assert (local["warmup_runs"], local["iterations"], local["num_trials"]) == (1, 5, 3)
    assert local["isolated"] is False and contest["isolated"] is True
    assert contest["timing_method"] == "cupti" and contest["timeout_seconds"] == 300.0
    assert contest["atol"] == 0.01 and contest["required_matched_ratio"] == 1.0
    assert s.reference_timed_calls == 1
    decode = eval_settings(DECODE).local_fields()
    assert (decode["warmup_runs"], decode["iterations"], decode["num_trials"]) == (10, 50, 3)


def test_moe_contest_tolerance_comes_from_its_file() -> None:
    from fib_core.bench.evaluation.tolerance import resolve_tolerance
    from fib_core.data.definition import Definition

    contest = eval_settings(MOE).contest_fields()
    assert (contest["atol"], contest["rtol"], contest["required_matched_ratio"]) == (1.0, 0.3, 0.9)
    definition = Definition.from_dict(
        {
            "name": MOE,
            "op_type": "moe",
            "axes": {},
            "inputs": {},
            "outputs": {},
            "reference": "def run():\n    pass\n",
        }
    )
    tol = resolve_tolerance(definition, BenchmarkConfig())
    assert (tol.atol, tol.rtol, tol.required_matched_ratio) == (1.0, 0.3, 0.9)
    assert tol.sources["atol"] == "contest"


def test_a_moe_without_settings_gets_the_packaged_op_type_ratio_in_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's own fp8 MoE folder (no eval.toml): the organizers' packaged MoE default (0.95)
    holds for the local check and for the contest settings alike; the kit's MoE is graded at
    its file's 0.9 both ways."""
    import json

    from fib_core.bench.evaluation.tolerance import resolve_tolerance
    from fib_core.bench.grading import OP_TYPE_TOLERANCE
    from fib_core.data.definition import Definition
    from fib_core.dataset import registry

    folder = tmp_path / "my_moe_fp8"
    folder.mkdir()
    data = {"name": "my_moe_fp8", "op_type": "moe", "axes": {}, "inputs": {}, "outputs": {}}
    (folder / "definition.json").write_text(json.dumps(data))
    (folder / "reference.py").write_text("def run():\n    pass\n")
    monkeypatch.setenv(registry.PATH_ENV, str(folder))
    own = Definition.from_dict(registry.get("my_moe_fp8").definition_dict())
    packaged = OP_TYPE_TOLERANCE["moe"]["required_matched_ratio"]
    assert resolve_tolerance(own).required_matched_ratio == packaged
    assert eval_settings("my_moe_fp8").contest_fields()["required_matched_ratio"] == packaged
    assert f"matched {packaged:g}" in eval_settings("my_moe_fp8").describe_contest()

    kit = Definition.from_dict(registry.get(MOE).definition_dict())
    assert resolve_tolerance(kit).required_matched_ratio == 0.9
    assert eval_settings(MOE).contest_fields()["required_matched_ratio"] == 0.9


def test_organizer_counts_are_the_settings_tables_defaults() -> None:
    """One home for warm-up, iterations, trials and timeout: the settings table."""
    from fib_core.bench.grading import ORGANIZER_DEFAULTS

    kit = BenchmarkConfig()
    assert (kit.warmup_runs, kit.iterations, kit.num_trials, kit.timeout_seconds) == (
        ORGANIZER_DEFAULTS["warmup"],
        ORGANIZER_DEFAULTS["iterations"],
        ORGANIZER_DEFAULTS["trials"],
        ORGANIZER_DEFAULTS["timeout"],
    )
    assert (ORGANIZER_DEFAULTS["warmup"], ORGANIZER_DEFAULTS["iterations"]) == (10, 50)


def test_unknown_definition_gets_the_organizers_defaults(tmp_path: Path) -> None:
    s = eval_settings("my_own_definition", tmp_path)
    assert s.source is None
    assert s.contest_fields()["iterations"] == 50 and s.local_fields()["isolated"] is False


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[contest]\niterations = 'five'\n", "iterations"),
        ("[contest]\nwarmups = 1\n", "warmups"),
        ("[grading]\nwarmup = 1\n", "[grading]"),
        ("[reference]\ntimed_calls = 0\n", "timed_calls"),
        ("[contest\n", "TOML"),
    ],
)
def test_a_broken_settings_file_is_one_line_naming_it(
    tmp_path: Path, text: str, needle: str
) -> None:
    (tmp_path / "broken_def.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        eval_settings("broken_def", tmp_path)
    message = str(info.value)
    assert "broken_def.toml" in message and needle in message and "\n" not in message


def test_config_and_flags_override_the_definition_defaults() -> None:
    cfg = kit_config(PREFILL, {"iterations": 20})
    opts = RunOptions(flags={"warmup_runs": 3})
    engine = make_request(cfg, _Solution(), opts, device="cuda").engine
    assert engine["iterations"] == 20 and engine["warmup_runs"] == 3
    assert engine["num_trials"] == 3 and engine["isolated"] is False
    # a CPU run stays a smoke run, but what the user set still wins
    cpu = make_request(cfg, _Solution(), opts, device="cpu").engine
    assert cpu["iterations"] == 20 and cpu["num_trials"] == 1


def test_contest_ignores_config_and_refuses_clashing_flags() -> None:
    cfg = kit_config(PREFILL, {"iterations": 20, "isolated": False})
    request = make_request(cfg, _Solution(), RunOptions(contest=True, flags={"seed": 7}), "cuda")
    engine = request.engine
    assert (engine["warmup_runs"], engine["iterations"], engine["num_trials"]) == (1, 5, 3)
    assert engine["isolated"] is True and engine["seed"] == 7 and request.contest
    with pytest.raises(ConfigError, match="--iterations"):
        make_request(cfg, _Solution(), RunOptions(contest=True, flags={"seed": 7, "iterations": 9}), "cuda")
    # on the CPU the smoke counts would replace the organizers': refused, not mislabelled
    with pytest.raises(ConfigError, match="--contest runs the organizers' GPU settings"):
        make_request(cfg, _Solution(), RunOptions(contest=True), "cpu")
