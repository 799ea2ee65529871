"""Where each record of a FlashInfer-Trace dataset lives on disk, and which folder is a dataset.

One home for the layout, so that TraceSet's loading and writing, the kit's checks of a
solution's file name and its lock files name the same places:

- ``definitions/<op_type>/<name>.json``
- ``solutions/<author>/<definition>/<name>.json``
- ``workloads/<op_type>/<definition>.jsonl``
- ``traces/<author>/<op_type>/<definition>.jsonl`` (older datasets keep
  ``traces/<op_type>/<definition>.jsonl``; both are read)
- ``blob/workloads/<op_type>/<definition>/<definition>_<uuid>.safetensors``

Author, solution and workload names are free text, so they pass through :func:`path_segment`
before they name a folder or file.

>>> path_segment("team a/b")
'team_a_b'
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from fib_core.paths import DATASET_ENV, dataset_env_path

from .errors import DatasetNotFoundError

if TYPE_CHECKING:
    from .definition import Definition
    from .solution import Solution

DEFAULT_DATASET_PATH = Path("~/.cache/flashinfer_bench/dataset")
DATASET_FOLDERS = ("definitions", "solutions", "workloads", "traces")

_UNSAFE_PATH_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_SEGMENT = 100


def default_dataset_root() -> Path:
    """``$FIB_DATASET_PATH`` if set, else the organizers' default cache folder."""
    return dataset_env_path() or DEFAULT_DATASET_PATH.expanduser()


def path_segment(text: str) -> str:
    """A string made safe as one folder name (author and solution names are free text);
    a very long one is cut and given a digest of the whole, so it stays unique and short."""
    cleaned = _UNSAFE_PATH_CHARS.sub("_", text).strip("._")
    if len(cleaned) > _MAX_SEGMENT:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        cleaned = f"{cleaned[: _MAX_SEGMENT - 13]}-{digest}"
    return cleaned or "unknown"


def check_dataset_root(root: Path) -> None:
    """Raise :class:`DatasetNotFoundError` unless ``root`` is a folder holding a dataset folder."""
    if not root.is_dir():
        raise DatasetNotFoundError(
            root,
            "dataset folder",
            f"pass the dataset root or set {DATASET_ENV}; it holds definitions/ and workloads/",
        )
    if not any((root / sub).is_dir() for sub in DATASET_FOLDERS):
        # Most likely a folder above or below the dataset root: say so rather than load nothing.
        raise DatasetNotFoundError(
            root,
            "dataset folders (" + ", ".join(f"{s}/" for s in DATASET_FOLDERS) + ")",
            "is this the dataset root? point at the folder that holds definitions/",
        )


def dataset_files(folder: Path, pattern: str) -> list[Path]:
    """Sorted files under ``folder`` (none if it is absent), so load order is reproducible."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob(pattern) if p.is_file())


def definition_file(root: Path, definition: Definition) -> Path:
    return root / "definitions" / definition.op_type / f"{definition.name}.json"


def solution_file(root: Path, solution: Solution) -> Path:
    return (
        root
        / "solutions"
        / path_segment(solution.author)
        / path_segment(solution.definition)
        / f"{path_segment(solution.name)}.json"
    )


def trace_file(root: Path, author: str, definition: Definition) -> Path:
    """The file a trace of ``author``'s solution is appended to."""
    return root / "traces" / path_segment(author) / definition.op_type / f"{definition.name}.jsonl"


def workload_file(root: Path, definition: Definition) -> Path:
    return root / "workloads" / definition.op_type / f"{definition.name}.jsonl"


def workload_blob_file(definition: Definition, workload_uuid: str) -> Path:
    """A workload's safetensors file, relative to the root (workload records store it so)."""
    name = definition.name
    return (
        Path("blob")
        / "workloads"
        / definition.op_type
        / name
        / f"{name}_{path_segment(workload_uuid)}.safetensors"
    )


def traces_backup_folder(root: Path) -> Path:
    """A free ``traces_bak_<time>`` name beside ``traces/`` (a counter added when taken)."""
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    backup = root / f"traces_bak_{stamp}"
    n = 1
    while backup.exists():
        backup = root / f"traces_bak_{stamp}_{n}"
        n += 1
    return backup
