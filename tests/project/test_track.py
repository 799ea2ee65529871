"""A whole track in one fork: the [track] table, switch --add, the track score, the audit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fib_core.data import Solution
from fib_core.errors import ConfigError
from fib_core.project.config import load_config
from fib_core.project.submission_audit import (
    AuditSettings,
    audit_settings,
    audit_submission,
)
from fib_core.project.switch import add_definition, switch_track
from fib_core.project.track import definition_config, single_definition_text, track_configs
from fib_core.project.track_score import track_score

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
KIT = Path(__file__).resolve().parents[2]


def add_starter(root: Path, definition: str, text: str) -> None:
    d = root / "starters" / definition / "triton"
    d.mkdir(parents=True)
    (d / "starter.toml").write_text(
        '[build]\nlanguage = "triton"\nentry_point = "kernel.py::run"\n'
        f'[solution]\ndescription = "{definition}"\n'
    )
    (d / "kernel.py").write_text(text)


@pytest.fixture
def fork(tmp_path: Path) -> Path:
    add_starter(tmp_path, DECODE, "def run(): 'decode'\n")
    add_starter(tmp_path, PREFILL, "def run(): 'prefill'\n")
    add_starter(tmp_path, "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", "")
    switch_track(tmp_path, DECODE)
    (tmp_path / "solution" / "triton" / "kernel.py").write_text("def run(): 'my decode'\n")
    return tmp_path


# ---- track score --------------------------------------------------------------------------


def test_track_score_is_the_mean_of_both_definitions() -> None:
    ts = track_score("gated_delta_net", {DECODE: 3.0, PREFILL: 1.5})
    assert ts.score == pytest.approx(2.25)
    assert ts.complete and ts.missing == () and ts.failing == ()


def test_a_missing_definition_halves_a_two_definition_track() -> None:
    ts = track_score("gated_delta_net", {DECODE: 3.0})
    assert ts.score == pytest.approx(1.5)
    assert ts.missing == (PREFILL,)
    assert ts.scores == {DECODE: 3.0, PREFILL: None}
    assert "missing" in "\n".join(ts.lines())


def test_a_failing_definition_counts_zero() -> None:
    ts = track_score("gated_delta_net", {DECODE: 0.0, PREFILL: 4.0})
    assert ts.score == pytest.approx(2.0)
    assert ts.failing == (DECODE,) and not ts.complete


def test_one_definition_track_is_its_score() -> None:
    moe = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
    assert track_score("fused_moe", {moe: 1.7}).score == pytest.approx(1.7)
    assert track_score("fused_moe", {}).score == 0.0


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_track_score_rejects_impossible_scores(bad: float) -> None:
    with pytest.raises(ValueError, match="finite number"):
        track_score("gated_delta_net", {DECODE: bad})


def test_track_score_rejects_a_stray_definition() -> None:
    with pytest.raises(ValueError, match="not in track"):
        track_score("sparse_attention", {DECODE: 1.0})


# ---- config and switch --add ---------------------------------------------------------------


def test_add_keeps_the_kernel_and_lists_the_track(fork: Path) -> None:
    result = add_definition(fork, PREFILL)
    assert result.installed == fork / "solution" / PREFILL / "triton"
    assert (fork / "solution" / DECODE / "triton" / "kernel.py").read_text() == (
        "def run(): 'my decode'\n"
    )
    assert not (fork / "solution" / "triton").exists()
    cfg = load_config(fork / "config.toml")
    assert cfg.track == (DECODE, PREFILL)
    assert cfg.source_dir == fork / "solution" / DECODE / "triton"
    names = [c.solution.definition for c in track_configs(fork / "config.toml")]
    assert names == [DECODE, PREFILL]
    prefill = definition_config(fork / "config.toml", PREFILL)
    assert prefill.source_dir == fork / "solution" / PREFILL / "triton"
    assert prefill.solution.author == cfg.solution.author


def test_add_refuses_another_track_and_a_held_definition(fork: Path) -> None:
    with pytest.raises(ConfigError, match="not in this fork's track"):
        add_definition(fork, "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048")
    add_definition(fork, PREFILL)
    with pytest.raises(ConfigError, match="already holds"):
        add_definition(fork, PREFILL)


def test_plain_switch_refuses_a_track_fork(fork: Path) -> None:
    add_definition(fork, PREFILL)
    with pytest.raises(ConfigError, match="holds the track"):
        switch_track(fork, PREFILL)


def test_single_definition_text_is_the_organizers_form(fork: Path, tmp_path: Path) -> None:
    add_definition(fork, PREFILL)
    text = single_definition_text(definition_config(fork / "config.toml", PREFILL))
    assert "[track" not in text
    out = tmp_path / "single" / "config.toml"
    out.parent.mkdir()
    out.write_text(text)
    one = load_config(out)
    assert one.solution.definition == PREFILL and one.track == ()
    assert one.source_dir == out.parent / "solution" / "triton"


def test_unknown_definition_is_named_with_a_hint(fork: Path) -> None:
    add_definition(fork, PREFILL)
    with pytest.raises(ConfigError, match="did you mean 'gdn_prefill_qk4_v8_d128_k_last'"):
        definition_config(fork / "config.toml", "gdn_prefil_qk4_v8_d128_k_last")


def test_typos_in_the_track_tables_get_the_closest_name(fork: Path) -> None:
    add_definition(fork, PREFILL)
    path = fork / "config.toml"
    text = path.read_text()
    typos = [
        (f'definitions = ["{DECODE}", "{PREFILL}"]',
         f'definitions = ["{DECODE}", "gdn_prefil_qk4_v8_d128_k_last"]',
         f"lists 'gdn_prefil_qk4_v8_d128_k_last', .*did you mean '{PREFILL}'"),
        (f"[track.{PREFILL}]", "[track.gdn_prefil_qk4_v8_d128_k_last]",
         rf"did you mean \[track\.{PREFILL}\]"),
        (f'definition = "{DECODE}"', 'definition = "gdn_decod_qk4_v8_d128_k_last"',
         f"did you mean '{DECODE}'"),
    ]
    for old, new, message in typos:
        assert old in text
        path.write_text(text.replace(old, new, 1))
        with pytest.raises(ConfigError, match=message):
            load_config(path)


def test_a_track_tables_entry_point_errors_name_that_table_and_folder(fork: Path) -> None:
    from fib_core.project.pack import pack_solution

    add_definition(fork, PREFILL)
    path = fork / "config.toml"
    text = path.read_text()
    table = text.index(f"[track.{PREFILL}]")
    head, tail = text[:table], text[table:]
    path.write_text(head + tail.replace('entry_point = "kernel.py::run"', 'entry_point = "run"'))
    with pytest.raises(ConfigError) as err:
        definition_config(path, PREFILL)
    assert f"[track.{PREFILL}] entry_point = 'run'" in str(err.value)
    assert f"relative to solution/{PREFILL}/triton/" in str(err.value)
    path.write_text(head + tail.replace("kernel.py::run", "kernel.py::go"))
    with pytest.raises(ConfigError) as err:
        pack_solution(definition_config(path, PREFILL))
    assert f"fix [track.{PREFILL}] entry_point in config.toml" in str(err.value)
    assert "[build]" not in str(err.value)
    path.write_text(head.replace("kernel.py::run", "main.py::run") + tail)
    with pytest.raises(ConfigError, match=r"^\S+: \[build\] entry_point file 'main.py' is not in"):
        pack_solution(load_config(path))


def test_add_writes_a_triton_config_without_cuda_keys(fork: Path) -> None:
    add_definition(fork, PREFILL)
    text = (fork / "config.toml").read_text()
    assert "\nbinding =" not in text and "dependencies = []" not in text
    assert "# file::function inside solution/<definition>/<language>/" in text
    assert "inside solution/<language>/" not in text
    assert load_config(fork / "config.toml").build.binding == "tvm-ffi"  # the default still


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (f'[track]\ndefinitions = ["{PREFILL}"]\n', "must include"),
        (f'[track]\ndefinitions = ["{DECODE}", "{PREFILL}"]\n', r"no \[track\.gdn_prefill"),
        (
            f'[track]\ndefinitions = ["{DECODE}", "{PREFILL}"]\n[track.{PREFILL}]\n'
            'languge = "triton"\n',
            "did you mean 'language'",
        ),
        (f'[track]\ndefinitions = ["{DECODE}"]\n[track.{DECODE}]\nname = "x"\n', "repeats"),
        (
            f'[track]\ndefinitions = ["{DECODE}", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"]\n',
            "not the definitions of one track",
        ),
    ],
)
def test_bad_track_tables_are_one_line_errors(fork: Path, extra: str, message: str) -> None:
    path = fork / "config.toml"
    path.write_text(path.read_text() + "\n" + extra)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


# ---- submission audit ----------------------------------------------------------------------


def _solution(files: dict[str, str], entry: str = "kernel.py::run") -> Solution:
    return Solution.from_dict(
        {
            "name": "s",
            "definition": DECODE,
            "author": "me",
            "spec": {
                "language": "triton",
                "target_hardware": ["B200"],
                "entry_point": entry,
            },
            "sources": [{"path": p, "content": c} for p, c in files.items()],
        }
    )


def _rules(findings) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in findings:
        out.setdefault(f.rule, []).append(f.where)
    return out


def test_audit_flags_flashinfer_vendor_and_unknown_packages(fork: Path) -> None:
    cfg = load_config(fork / "config.toml")
    sol = _solution(
        {
            "kernel.py": "import torch\nimport triton.language as tl\nimport helpers\n"
            "import flashinfer\nfrom fla.ops import chunk_gated_delta_rule\nimport numpy\n"
            "import os, math\ndef run(): pass\n",
            "helpers.py": "X = 1\n",
        }
    )
    found = _rules(audit_submission(sol, cfg, AuditSettings()))
    assert found == {
        "flashinfer-calls": ["kernel.py:4"],
        "vendor-kernels": ["kernel.py:5"],
        "environment-packages": ["kernel.py:6"],
    }
    assert all(f.severity == "warning" for f in audit_submission(sol, cfg, AuditSettings()))


def test_audit_settings_promote_ignore_and_allow(fork: Path) -> None:
    cfg = load_config(fork / "config.toml")
    sol = _solution({"kernel.py": "import flashinfer\nimport numpy\ndef run(): pass\n"})
    data = {"audit": {"errors": ["flashinfer-calls"], "allowed_packages": ["numpy"]}}
    findings = audit_submission(sol, cfg, audit_settings(cfg.path, data))
    assert [(f.rule, f.severity) for f in findings] == [("flashinfer-calls", "error")]
    data = {"audit": {"ignore": ["flashinfer-calls", "environment-packages"]}}
    assert audit_submission(sol, cfg, audit_settings(cfg.path, data)) == []


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"ignore": ["flashinfer-call"]}, "did you mean 'flashinfer-calls'"),
        ({"ignore": ["entry-point"]}, "cannot be ignored"),
        ({"eror": []}, "did you mean 'errors'"),
        ({"errors": "cuda-arch"}, "list of strings"),
    ],
)
def test_bad_audit_tables_are_one_line_errors(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        audit_settings(Path("config.toml"), {"audit": table})


def test_audit_cuda_arch_and_compile_flags(fork: Path) -> None:
    cfg = load_config(fork / "config.toml")
    cfg.build.extra_cuda_cflags = ["-gencode=arch=compute_90a,code=sm_90a"]
    sol = _solution(
        {
            "kernel.py": "def run(): pass\n",
            "k.cu": "#include <cublas_v2.h>\n// built for sm_100a\n",
        }
    )
    found = audit_submission(sol, cfg, AuditSettings())
    arch = [f for f in found if f.rule == "cuda-arch"]
    assert any("custom compile flags" in f.message for f in arch)
    assert {m for f in arch for m in ("compute_90a", "sm_90a") if m in f.message} == {
        "compute_90a",
        "sm_90a",
    }
    assert not any(f.message.startswith("targets sm_100a") for f in arch)
    assert [f.where for f in found if f.rule == "vendor-kernels"] == ["k.cu:1"]


def test_the_shipped_starters_pass_the_audit_cleanly() -> None:
    from fib_core.project.pack import collect_sources
    from fib_core.project.switch import read_starter

    for starter in sorted((KIT / "starters").glob("*/*/starter.toml")):
        cfg = load_config(KIT / "config.toml")
        build = read_starter(starter.parent)["build"]
        for key, value in build.items():
            setattr(cfg.build, key, value)
        solution = _solution(dict(collect_sources(starter.parent)), build["entry_point"])
        findings = audit_submission(solution, cfg, AuditSettings())
        assert findings == [], (starter, [str(f) for f in findings])


@pytest.mark.parametrize("value", ["kernel.py::run", 'a "q" \\ \n é', True, False, 3, 0.01, 1e-05])
def test_config_values_are_written_without_tomli_w_too(value) -> None:
    import tomllib

    from fib_core.project.template import _plain_value

    assert tomllib.loads(f"v = {_plain_value(value)}")["v"] == value
