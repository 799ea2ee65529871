"""safetensors blobs of workloads: resolving, reading (with LFS checks) and writing.

The public dataset keeps blobs in git-LFS; a clone without ``git lfs pull`` holds small text
pointers instead. Every read goes through :func:`load_blob`, so the contestant is told what to
run rather than seeing a safetensors header error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from safetensors import SafetensorError, safe_open

from fib_core.errors import LfsPointerError, SchemaError, is_lfs_pointer

from .containment import is_lexically_inside
from .errors import DatasetError, DatasetNotFoundError

if TYPE_CHECKING:
    import torch


def resolve_blob_path(root: Path | None, path: str | Path) -> Path:
    """A workload's blob path (``./blob/...`` or ``blob/...``) joined to the dataset root.

    A path that climbs out of the root, or an absolute one elsewhere than under the root, is
    refused: a dataset names files inside itself, never elsewhere on the machine.
    """
    # Imported here: fib_core.data.workload_checks loads this module at import (cycle).
    from .workload_checks import blob_path_problem

    p = Path(path)
    if root is None and p.is_absolute():
        return p  # an in-memory set built by code: there is no dataset folder to stay inside
    if root is None:
        raise DatasetError(
            f"{path}: a relative blob path needs a dataset root; load the TraceSet with from_path"
        )
    if p.is_absolute():
        problem = None if is_lexically_inside(p, Path(root)) else "outside the dataset root"
    else:
        problem = blob_path_problem(str(path))
    if problem:
        raise DatasetError(
            f"blob path {str(path)!r}: it is {problem}; blob paths are relative to the dataset "
            "root and stay inside it (move the blob under the dataset's blob/ folder)"
        )
    return p if p.is_absolute() else Path(root) / p


def _check_blob_file(path: Path) -> None:
    """A missing blob or a Git LFS pointer left in its place is one clear error naming the
    file and what to do, before safetensors sees it."""
    if not path.is_file():
        raise DatasetNotFoundError(
            path,
            "workload blob",
            "run `git lfs pull` in the dataset, or check the workload's 'path'",
        )
    if is_lfs_pointer(path):
        raise LfsPointerError(path)


def load_blob(path: Path) -> dict[str, torch.Tensor]:
    """All tensors of one safetensors file, on the CPU."""
    _check_blob_file(path)
    # Imported here: safetensors.torch loads torch (~3 s); importing this module does not need it.
    from safetensors.torch import load_file

    try:
        return load_file(path, device="cpu")
    except SafetensorError as err:
        raise SchemaError("a safetensors file", file=path, found=str(err)) from None


def load_blob_tensor(path: Path, tensor_key: str) -> torch.Tensor:
    """One tensor of a blob, on the CPU, reading only that tensor; a missing key is named
    together with the keys the file has."""
    _check_blob_file(path)
    try:
        with safe_open(str(path), framework="pt", device="cpu") as fh:
            keys = list(fh.keys())
            if tensor_key not in keys:
                raise DatasetError(
                    f"{path}: no tensor {tensor_key!r} (the file holds "
                    f"{', '.join(keys) or 'nothing'}); fix the workload's tensor_key"
                )
            return fh.get_tensor(tensor_key)
    except DatasetError:
        raise
    except Exception as err:  # a corrupt or foreign file
        raise SchemaError("a safetensors file", file=path, found=str(err)) from None


def save_blob(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Write tensors (moved to CPU, made contiguous) to a new safetensors file."""
    if path.exists():
        raise DatasetError(f"{path}: blob file already exists; choose another workload uuid")
    # Imported here: safetensors.torch loads torch (~3 s); importing this module does not need it.
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(path))
