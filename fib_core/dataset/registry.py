"""The definition registry: every definition the kit knows, one folder each, plugins by file name.

The engine, the dataset writer, the report and the project layer learn about a definition only
here. A definition is a folder named after it; the files in it are its plugins, each optional
except the first:

    definition.json     the definition (FlashInfer-Trace format, without the "reference" key)
    reference.py        the reference: a global ``run(...)`` (its text becomes "reference")
    workloads.py        ``COLUMNS``, ``ROWS`` (var-axis values of its workloads); optional
                        ``BLOB_INPUTS`` (inputs stored as safetensors blobs), ``blobs(axes, gen)``
                        (those tensors) and ``scalars(row)`` (scalar inputs of a row)
    generator.py        ``generate(definition, axes, gen, device) -> {input: tensor}`` (optional
                        keywords ``wanted`` and ``sets``: see ``register_input_generator``)
    cost.py             ``cost(axes, inputs) -> fib_core.dataset.roofline.Cost``
    checker.py          ``check(definition, outputs, reference, inputs, tolerance)``, returning
                        a ``fib_core.checking.CheckResult``
    fast_reference.py   ``run(...)``: the reference's arithmetic, faster, for untimed sets
    tracing.py          ``RULE``: the ``fib_core.tracing_rules.TracingRule`` the tracer applies to
                        its calls (inputs to dump as blobs, how calls are deduplicated)
    eval.toml           evaluation settings ([contest], [local], [reference])

Without ``workloads.py`` the definition has no embedded workloads; without ``generator.py`` its
inputs are random; without ``cost.py`` it has no roofline column; without ``checker.py`` outputs
are compared element by element; without ``tracing.py`` the tracer records axes only; without
``eval.toml`` the organizers' defaults apply.

The kit's own folders are ``fib_core/dataset/definitions/<name>/``. More come from
``$FIB_DEFINITIONS_PATH``: folders separated by the path separator (``:``), each either one
definition folder or a folder of them. They join the embedded dataset like the kit's own.

Example::

    from fib_core.dataset import registry
    registry.definitions()                      # ['dsa_sparse_attention_...', ...]
    entry = registry.get("gdn_decode_qk4_v8_d128_k_last")
    entry.cost is None, entry.generator is None  # (False, False)
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from fib_core.errors import FibError
from fib_core.tracing_rules import TracingRule

BUILTIN_DIR = Path(__file__).resolve().parent / "definitions"
PATH_ENV = "FIB_DEFINITIONS_PATH"
DEFINITION_FILE = "definition.json"
SETTINGS_FILE = "eval.toml"


class DefinitionFolderError(FibError):
    """A definition folder is unusable: unreadable JSON, a plugin that fails to load, a clash."""


def exec_reference(source: str, definition_name: str, where: str) -> dict[str, Any]:
    """Execute a reference's source on its own, as a harness does (the text, not an import),
    and return its namespace; ``where`` is the file name tracebacks show."""
    namespace: dict[str, Any] = {"__name__": f"fib_reference_{definition_name}"}
    exec(compile(source, where, "exec"), namespace)
    return namespace


@dataclass(frozen=True)
class DefinitionEntry:
    """One definition folder; each plugin property is None when its file is absent."""

    name: str
    folder: Path

    # --- data files ---------------------------------------------------------------------

    @property
    def definition_path(self) -> Path:
        return self.folder / DEFINITION_FILE

    @property
    def reference_path(self) -> Path | None:
        path = self.folder / "reference.py"
        return path if path.is_file() else None

    @property
    def settings_path(self) -> Path | None:
        """The evaluation-settings file (``eval.toml``), if the folder has one."""
        path = self.folder / SETTINGS_FILE
        return path if path.is_file() else None

    def definition_json(self) -> dict[str, Any]:
        """The committed JSON as written (no reference attached)."""
        return _read_json(str(self.definition_path), self.name)

    def reference_source(self) -> str:
        """The reference text: ``reference.py``, else the JSON's own "reference" key."""
        if self.reference_path is not None:
            return self.reference_path.read_text(encoding="utf-8")
        text = self.definition_json().get("reference")
        if not isinstance(text, str):
            raise DefinitionFolderError(
                f'{self.folder}: no reference.py and no "reference" in {DEFINITION_FILE}; '
                "add a reference.py with a global run(...)"
            )
        return text

    def definition_dict(self) -> dict[str, Any]:
        """The definition as a dataset holds it: the JSON with its reference text attached."""
        data = dict(self.definition_json())
        data["reference"] = self.reference_source()
        return data

    def load_reference(self) -> dict[str, Any]:
        """Execute the reference's source alone (as a harness does) and return its namespace."""
        where = str(self.reference_path or self.definition_path)
        return exec_reference(self.reference_source(), self.name, where)

    # --- code plugins -------------------------------------------------------------------

    def module(self, stem: str) -> ModuleType | None:
        """The folder's ``<stem>.py`` loaded as a module (once per process), or None."""
        path = self.folder / f"{stem}.py"
        return _load_module(str(path), self.name, stem) if path.is_file() else None

    def _plugin(self, stem: str, attr: str) -> Callable[..., Any] | None:
        mod = self.module(stem)
        if mod is None:
            return None
        fn = getattr(mod, attr, None)
        if not callable(fn):
            raise DefinitionFolderError(
                f"{self.folder / (stem + '.py')}: defines no function {attr}(...); add it or "
                "remove the file"
            )
        return fn

    @property
    def generator(self) -> Callable[..., dict[str, Any]] | None:
        return self._plugin("generator", "generate")

    @property
    def cost(self) -> Callable[..., Any] | None:
        return self._plugin("cost", "cost")

    @property
    def checker(self) -> Callable[..., Any] | None:
        return self._plugin("checker", "check")

    @property
    def fast_reference(self) -> Callable[..., Any] | None:
        return self._plugin("fast_reference", "run")

    @property
    def tracing_rule(self) -> TracingRule | None:
        """The folder's tracing rule (``tracing.py``'s ``RULE``), or None without the file."""
        mod = self.module("tracing")
        if mod is None:
            return None
        if not hasattr(mod, "RULE"):
            raise DefinitionFolderError(
                f"{self.folder / 'tracing.py'}: defines no RULE; set RULE = TracingRule(...) "
                "or remove the file"
            )
        if not isinstance(mod.RULE, TracingRule):
            raise DefinitionFolderError(
                f"{self.folder / 'tracing.py'}: RULE is a {type(mod.RULE).__name__}; set it to "
                "a fib_core.tracing_rules.TracingRule(...)"
            )
        return mod.RULE

    # --- workloads ----------------------------------------------------------------------

    def workload_rows(self) -> list[dict[str, int]]:
        """Var-axis values (and extra columns) of each workload, in order; [] without a table."""
        mod = self.module("workloads")
        if mod is None:
            return []
        columns = tuple(getattr(mod, "COLUMNS", ()))
        return [dict(zip(columns, row, strict=True)) for row in getattr(mod, "ROWS", ())]

    @property
    def blob_inputs(self) -> tuple[str, ...]:
        mod = self.module("workloads")
        return tuple(getattr(mod, "BLOB_INPUTS", ())) if mod is not None else ()

    def scalar_inputs(self, row: dict[str, int]) -> dict[str, float | int]:
        mod = self.module("workloads")
        fn = getattr(mod, "scalars", None) if mod is not None else None
        return dict(fn(row)) if callable(fn) else {}

    def blob_tensors(self, axes: dict[str, int], gen: Any) -> dict[str, Any]:
        mod = self.module("workloads")
        fn = getattr(mod, "blobs", None) if mod is not None else None
        return dict(fn(axes, gen)) if callable(fn) else {}


def definitions() -> list[str]:
    """Every registered definition name, sorted."""
    return sorted(_entries(os.environ.get(PATH_ENV, "")))


def get(name: str) -> DefinitionEntry | None:
    """The folder of ``name``, or None for a definition the registry does not hold."""
    return _entries(os.environ.get(PATH_ENV, "")).get(name)


def entries() -> list[DefinitionEntry]:
    """Every registered definition, sorted by name."""
    table = _entries(os.environ.get(PATH_ENV, ""))
    return [table[name] for name in sorted(table)]


def plugin_kinds(entry: DefinitionEntry) -> list[str]:
    """Which optional plugins a folder has (for ``python -m fib_core.dataset list --plugins``)."""
    files = {
        "workloads": "workloads.py",
        "generator": "generator.py",
        "cost": "cost.py",
        "checker": "checker.py",
        "fast_reference": "fast_reference.py",
        "tracing": "tracing.py",
        "settings": SETTINGS_FILE,
    }
    return [kind for kind, file in files.items() if (entry.folder / file).is_file()]


# --- discovery and loading ---------------------------------------------------------------


def _candidate_folders(extra: str) -> list[Path]:
    roots = [BUILTIN_DIR] + [Path(p).expanduser() for p in extra.split(os.pathsep) if p.strip()]
    found: list[Path] = []
    for root in roots:
        if (root / DEFINITION_FILE).is_file():
            found.append(root)
        elif root.is_dir():
            found.extend(sorted(p.parent for p in root.glob(f"*/{DEFINITION_FILE}")))
        elif root != BUILTIN_DIR:
            raise DefinitionFolderError(
                f"{PATH_ENV}: {root} is not a folder; name folders of definition folders"
            )
    return found


@lru_cache(maxsize=8)
def _entries(extra: str) -> dict[str, DefinitionEntry]:
    table: dict[str, DefinitionEntry] = {}
    for folder in _candidate_folders(extra):
        name = folder.name
        declared = _read_json(str(folder / DEFINITION_FILE), name).get("name")
        if declared != name:
            raise DefinitionFolderError(
                f"{folder / DEFINITION_FILE}: name {declared!r} differs from its folder's "
                f"name {name!r}; rename one so they agree"
            )
        if name in table:
            raise DefinitionFolderError(
                f"{folder}: definition {name!r} is already defined by {table[name].folder}; "
                f"remove one of them from {PATH_ENV}"
            )
        table[name] = DefinitionEntry(name, folder.resolve())
    return table


def _read_json(path: str, name: str) -> dict[str, Any]:
    """The folder's definition JSON, re-read only when the file changed."""
    try:
        stat = Path(path).stat()
    except OSError as err:
        raise DefinitionFolderError(f"{path}: cannot be read ({err.strerror}); fix it") from None
    return _read_json_cached(path, name, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _read_json_cached(path: str, name: str, _mtime: int, _size: int) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DefinitionFolderError(f"{path}: not a readable JSON file ({err}); fix it") from None
    if not isinstance(data, dict):
        raise DefinitionFolderError(f"{path}: expected a JSON object for definition {name!r}")
    return data


@lru_cache(maxsize=128)
def _load_module(path: str, name: str, stem: str) -> ModuleType:
    """Load a plugin file by path under a private module name (folders are not packages)."""
    module_name = f"fib_definition_plugins.{name}.{stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise DefinitionFolderError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except FibError:
        raise
    except (SyntaxError, ImportError) as err:
        sys.modules.pop(module_name, None)
        raise DefinitionFolderError(
            f"{path}: cannot be loaded ({type(err).__name__}: {err})"
        ) from None
    return module
