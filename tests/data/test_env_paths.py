"""The environment's folders are read in one place, and dtype sizes come from one table."""

from __future__ import annotations

from pathlib import Path

from fib_core.data.dtypes import DTYPE_NAMES, TORCH_ELEMENT_BYTES, element_bytes, torch_dtype
from fib_core.data.traceset import default_dataset_root
from fib_core.dataset.embedded import default_dataset_path
from fib_core.paths import dataset_env_path


def test_dataset_variable_blank_or_unset_means_none(monkeypatch, tmp_path):
    monkeypatch.delenv("FIB_DATASET_PATH", raising=False)
    assert dataset_env_path() is None
    monkeypatch.setenv("FIB_DATASET_PATH", "   ")
    assert dataset_env_path() is None
    assert default_dataset_root() == Path("~/.cache/flashinfer_bench/dataset").expanduser()
    monkeypatch.setenv("FIB_DATASET_PATH", str(tmp_path / "ds"))
    assert dataset_env_path() == tmp_path / "ds"
    assert default_dataset_root() == default_dataset_path() == tmp_path / "ds"


def test_element_sizes_match_torch_for_every_format_dtype():
    for name in DTYPE_NAMES:
        dtype = torch_dtype(name)
        assert element_bytes(name) == dtype.itemsize, name
        assert TORCH_ELEMENT_BYTES[str(dtype).removeprefix("torch.")] == dtype.itemsize
