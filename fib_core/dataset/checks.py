"""Up-front dataset checks: find a broken dataset before any workload runs.

A dataset cloned without ``git lfs pull`` holds small text pointers where its safetensors blobs
should be; one with a missing blob names a file that is not there. Found one workload at a
time, each would cost a worker start and read as that workload's RUNTIME_ERROR. These checks
read only file headers and raise one :class:`~fib_core.errors.FibError` line naming the first
bad file, how many others share the problem, and what to do.

Example::

    from fib_core.dataset.checks import check_blobs
    check_blobs(trace_set, "gdn_decode_qk4_v8_d128_k_last", [t.workload for t in selection])
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fib_core.errors import FibError, is_lfs_pointer
from fib_core.paths import DATASET_ENV


class DatasetCheckError(FibError):
    """The dataset cannot serve the selected workloads (LFS pointers, missing blobs)."""


def blob_paths(root: Path | None, workloads: Iterable[Any]) -> list[Path]:
    """Every safetensors file the ``workloads`` read, once each, in first-use order."""
    # Imported here: fib_core.data.blobs loads pydantic (~50 ms); this module's import does not.
    from fib_core.data.blobs import resolve_blob_path

    seen: dict[Path, None] = {}
    for workload in workloads:
        for spec in workload.inputs.values():
            if getattr(spec, "type", None) != "safetensors":
                continue
            seen.setdefault(resolve_blob_path(root, spec.path), None)
    return list(seen)


def check_blobs(trace_set: Any, definition: str, workloads: Iterable[Any]) -> None:
    """Raise one line if any blob of ``workloads`` is missing or still a git-LFS pointer."""
    root = Path(trace_set.root) if trace_set.root is not None else None
    paths = blob_paths(root, workloads)
    missing = [p for p in paths if not p.is_file()]
    pointers = [p for p in paths if p.is_file() and is_lfs_pointer(p)]
    where = f" (dataset {root})" if root is not None else ""
    if pointers:
        raise DatasetCheckError(
            f"{pointers[0]}: is a git-LFS pointer, not the data"
            f"{_and_more(len(pointers), 'blob')} of {definition}{where}; run `git lfs pull` "
            "in the dataset"
        )
    if missing:
        raise DatasetCheckError(
            f"{missing[0]}: workload blob not found{_and_more(len(missing), 'blob')} of "
            f"{definition}{where}; run `git lfs pull` in the dataset, or check the workloads' "
            "'path' fields"
        )


def name_dataset_variable(err: FibError) -> FibError:
    """``err`` with ``$FIB_DATASET_PATH`` named in front when that variable chose the folder."""
    value = os.environ.get(DATASET_ENV)
    if not value or str(err).startswith(f"{DATASET_ENV}="):  # (a hint may name it too)
        return err
    return DatasetCheckError(
        f"{DATASET_ENV}={value}: {err}; point {DATASET_ENV} at the dataset root (the folder "
        "holding definitions/), or unset it to use the embedded dataset"
    )


def _and_more(count: int, noun: str) -> str:
    return "" if count <= 1 else f" (and {count - 1} more {noun}{'s' if count > 2 else ''})"
