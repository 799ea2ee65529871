"""config.toml: every mistake gets one line naming the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from fib_core.errors import ConfigError
from fib_core.project.config import check_definition_exists, load_config
from fib_core.project.template import render_config

GOOD = """
[solution]
name = "team-gdn"
definition = "gdn_decode_qk4_v8_d128_k_last"
author = "team"

[build]
language = "triton"
entry_point = "kernel.py::run"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    assert "config.toml" in message
    return message


def test_good_config_loads_with_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.solution.definition == "gdn_decode_qk4_v8_d128_k_last"
    assert cfg.build.destination_passing_style is True
    assert cfg.build.binding == "tvm-ffi"
    assert cfg.build.entry_file == "kernel.py" and cfg.build.entry_function == "run"
    assert cfg.benchmark.iterations is None
    assert cfg.source_dir == tmp_path.resolve() / "solution" / "triton"


def test_shipped_config_loads(repo_root: Path) -> None:
    cfg = load_config(repo_root / "config.toml")
    assert cfg.solution.definition == "gdn_decode_qk4_v8_d128_k_last"
    assert (cfg.source_dir / cfg.build.entry_file).is_file()


def test_unknown_key_names_the_closest(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace("entry_point", "entrypoint"))
    assert "unknown key 'entrypoint'" in msg and "did you mean 'entry_point'" in msg


def test_unknown_section(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD + "\n[benchmarks]\nwarmup = 1\n")
    assert "unknown section [benchmarks]" in msg and "did you mean 'benchmark'" in msg


def test_track_name_where_a_definition_belongs(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace("gdn_decode_qk4_v8_d128_k_last", "gated_delta_net"))
    assert "is a track, not a definition" in msg
    assert "gdn_decode_qk4_v8_d128_k_last" in msg and "gdn_prefill_qk4_v8_d128_k_last" in msg


def test_entry_point_without_separator(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace("kernel.py::run", "kernel"))
    assert "entry_point = 'kernel' must be 'file::function'" in msg


def test_entry_point_file_must_fit_language(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace("kernel.py::run", "kernel.cu::run"))
    assert "does not fit language = 'triton'" in msg


def test_wrong_type_and_choice(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('language = "triton"', 'language = "tritn"'))
    assert "not one of triton, cuda, python" in msg and "did you mean 'triton'" in msg
    msg = error_of(tmp_path, GOOD + "\n[benchmark]\nwarmup = true\n")
    assert "warmup = True must be a whole number" in msg


@pytest.mark.parametrize("name", ["../../evil", "my team", ".hidden", ""])
def test_solution_name_is_one_file_name(tmp_path: Path, name: str) -> None:
    import re

    text = re.sub(r'(?m)^name = ".*"$', f'name = "{name}"', GOOD, count=1)
    msg = error_of(tmp_path, text)
    assert f"[solution] name = {name!r} must be letters, digits" in msg


def test_missing_required_key(tmp_path: Path) -> None:
    msg = error_of(tmp_path, GOOD.replace('author = "team"\n', ""))
    assert "[solution] is missing 'author'" in msg


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    assert "not valid TOML" in error_of(tmp_path, GOOD + "\n[build\n")
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope" / "config.toml")


def test_definition_not_in_dataset_names_closest(tmp_path: Path) -> None:
    cfg = load_config(
        write(tmp_path, GOOD.replace("gdn_decode_qk4_v8_d128_k_last", "gdn_decode_qk4_v8_d128"))
    )
    with pytest.raises(ConfigError) as info:
        check_definition_exists(
            cfg, ["gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last"], "DATA"
        )
    assert "not in the dataset at DATA" in str(info.value)
    assert "closest: gdn_decode_qk4_v8_d128_k_last" in str(info.value)


def test_rendered_template_round_trips(tmp_path: Path) -> None:
    values = {
        "solution": {"name": "n", "definition": "d_x", "author": "a", "description": 'q"uote'},
        "build": {
            "language": "cuda",
            "entry_point": "kernel.cu::run",
            "cuda_arch": "sm_100a",
            "extra_cuda_cflags": ["-O3", "-lineinfo"],
        },
        "benchmark": {"iterations": 7, "workloads": ["batch_size=1"]},
    }
    cfg = load_config(write(tmp_path, render_config(values)))
    assert cfg.solution.description == 'q"uote'
    assert cfg.build.extra_cuda_cflags == ["-O3", "-lineinfo"]
    assert cfg.build.cuda_arch == "sm_100a"
    assert cfg.benchmark.iterations == 7 and cfg.benchmark.workloads == ["batch_size=1"]
