"""What ``scripts/submit.py`` validates before it tags: the layout, definition and workload
categories for the fork's definition, in the dataset it runs on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fib_core.dataset import embedded_dataset_path
from fib_core.validate.fork import check_fork

KIT = Path(__file__).resolve().parents[2]
DECODE = "gdn_decode_qk4_v8_d128_k_last"


def decode_dataset(root: Path) -> Path:
    embedded = Path(embedded_dataset_path())
    for folder in ("definitions", "workloads"):
        (root / folder / "gdn").mkdir(parents=True)
        name = f"{DECODE}.json" if folder == "definitions" else f"{DECODE}.jsonl"
        shutil.copy(embedded / folder / "gdn" / name, root / folder / "gdn" / name)
    return root


def test_a_clean_dataset_lets_the_submission_go_on(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FIB_DATASET_PATH", str(decode_dataset(tmp_path / "ds")))
    lines: list[str] = []
    assert check_fork(KIT / "config.toml", echo=lines.append)
    assert len(lines) == 1 and lines[0].startswith(
        "validate (layout, definition, workload) of 1 definition(s): 0 error(s)")


@pytest.mark.parametrize("fault", ["axis", "place"])
def test_a_fault_in_the_fork_definition_stops_it(tmp_path: Path, monkeypatch, fault: str) -> None:
    root = decode_dataset(tmp_path / "ds")
    workloads = root / "workloads" / "gdn" / f"{DECODE}.jsonl"
    if fault == "axis":
        records = [json.loads(line) for line in workloads.read_text().splitlines()]
        records[0]["workload"]["axes"]["batch_size"] = 0
        workloads.write_text("".join(json.dumps(r) + "\n" for r in records))
        expected = f"workloads/gdn/{DECODE}.jsonl:1: workload.axes.batch_size:"
    else:
        (root / "workloads" / "decode").mkdir()
        workloads.rename(root / "workloads" / "decode" / workloads.name)
        expected = f"workloads/decode/{DECODE}.jsonl: op_type:"
    monkeypatch.setenv("FIB_DATASET_PATH", str(root))
    lines: list[str] = []
    assert not check_fork(KIT / "config.toml", echo=lines.append)
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {root}/{expected}"), lines


def test_the_embedded_dataset_is_not_written_out_for_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("FIB_DATASET_PATH", raising=False)
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "cache"))
    lines: list[str] = []
    assert check_fork(KIT / "config.toml", echo=lines.append)
    assert lines == ["validate: the embedded dataset (the kit's own, checked by its tests)"]
    assert not (tmp_path / "cache").exists()
