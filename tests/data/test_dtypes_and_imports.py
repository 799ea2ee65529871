"""dtype name mapping, and the promise that reading data never imports torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fib_core.data import DTYPE_NAMES, dtype_name, torch_dtype


def test_every_format_dtype_maps_both_ways():
    torch = pytest.importorskip("torch")
    for name in DTYPE_NAMES:
        dtype = torch_dtype(name)
        assert isinstance(dtype, torch.dtype)
        assert dtype_name(dtype) == name
    assert torch_dtype("float8_e4m3fn") is torch.float8_e4m3fn
    assert torch_dtype("bool") is torch.bool


def test_unknown_names_are_rejected():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="unknown dtype 'fp16'; expected one of float32"):
        torch_dtype("fp16")
    with pytest.raises(ValueError, match="has no FlashInfer-Trace name"):
        dtype_name(torch.complex64)


def test_loading_a_dataset_does_not_import_torch(tmp_path):
    (tmp_path / "definitions").mkdir()
    code = (
        "import sys\n"
        "from fib_core.data import TraceSet, Definition, Trace\n"
        f"TraceSet.from_path({str(tmp_path)!r})\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reference_signature_follows_edits(build):
    from fib_core.data import Definition

    d = Definition.from_dict(build.definition())
    assert d.reference_signature() == ["x", "table", "scale"]
    d.reference = "def run(a, b):\n    return a\n"
    assert d.reference_signature() == ["a", "b"]
