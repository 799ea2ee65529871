"""Tracer: records the shapes (and chosen tensors) of live calls as dataset workloads.

``enable_tracing()`` installs the tracer as the apply hook, so every call of an ``@apply``
function is seen whether or not a runtime routes it. ``flush()`` deduplicates per the rules
and appends one workload record per representative to
``<out_dir>/<op_type>/<definition>.jsonl`` (the dataset's own record format: dumped tensors as
``safetensors`` inputs, scalars as ``scalar``, everything else ``random``), with blobs under
``<blob_dir>/<op_type>/<definition>/``. Blob paths are always relative, as the format wants:
to the dataset root (``blob_dir`` must then lie inside it), so the folder loads with
``TraceSet.from_path`` and runs with ``run_local.py --workloads``. The root is ``dataset_root``,
else the one ``out_dir`` lies in (``<root>/traces/workloads``), else, when no ``out_dir`` is
given, ``$FIB_DATASET_PATH``. With no root known they
read ``blob/workloads/<op_type>/<definition>/<file>``, the dataset's own layout, and the first
flush that writes a blob warns where to put the two folders.

Flush also runs at interpreter exit and on SIGTERM. Calls recorded while a CUDA graph is being
captured keep references to the live tensors (copying them would be captured too); call
:meth:`Tracer.snapshot_graph_tensors` after a replay to read their values, or let flush do it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import uuid
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fib_core.apply.api import get_apply_hook, set_apply_hook
from fib_core.data import (
    Definition,
    RandomInput,
    SafetensorsInput,
    ScalarInput,
    Trace,
    Workload,
)
from fib_core.data.blobs import save_blob
from fib_core.data.containment import is_lexically_inside
from fib_core.data.json_io import append_jsonl, load_json
from fib_core.dataset import registry
from fib_core.errors import ConfigError, FibWarning
from fib_core.paths import dataset_env_path
from fib_core.tracing_rules import TraceEntry, TracingRule, axes_only_rule

from .hook_impl import make_tracing_hook
from .presets import full_preset


def kit_definitions() -> dict[str, Any]:
    """Every registered definition (the kit's folders and ``$FIB_DEFINITIONS_PATH``'s),
    references attached."""
    return {e.name: Definition.from_dict(e.definition_dict()) for e in registry.entries()}


def _dataset_definitions(root: Path) -> dict[str, Any]:
    out = {}
    for file in sorted((root / "definitions").rglob("*.json")):
        definition = load_json(file, Definition)
        out[definition.name] = definition
    return out


class Tracer:
    """Collects entries from live calls; ``flush()`` writes the kept ones as workloads.

    >>> tracer = Tracer(out_dir="ds/traces/workloads", dataset_root="ds")  # doctest: +SKIP
    >>> tracer.collect("gdn_decode_qk4_v8_d128_k_last", kwargs)  # doctest: +SKIP
    >>> tracer.flush()  # doctest: +SKIP
    {'gdn_decode_qk4_v8_d128_k_last': {'collected': 1, 'written': 1, 'blobs': 0}}
    """

    def __init__(
        self,
        rules: Mapping[str, TracingRule] | None = None,
        out_dir: str | Path | None = None,
        blob_dir: str | Path | None = None,
        *,
        dataset_root: str | Path | None = None,
        definitions: Mapping[str, Any] | None = None,
        default_rule: TracingRule | None = None,
    ) -> None:
        # The dataset root: given, else the one out_dir lies in (<root>/traces/workloads), else,
        # with no out_dir, $FIB_DATASET_PATH (records and blobs then both go there).
        root = Path(dataset_root).expanduser() if dataset_root is not None else None
        if out_dir is None:
            root = root if root is not None else dataset_env_path()
            if root is None:
                raise ConfigError(
                    "tracing: no output folder; pass out_dir= or set FIB_DATASET_PATH to the "
                    "dataset the workloads should join"
                )
            out_dir = root / "traces" / "workloads"
        self.out_dir = Path(out_dir).expanduser()
        if root is None and self.out_dir.parts[-2:] == ("traces", "workloads"):
            root = self.out_dir.parents[1]
        self.dataset_root = root
        if blob_dir is None:
            blob_dir = root / "blob" / "workloads" if root is not None else self.out_dir / "blob"
        self.blob_dir = Path(blob_dir).expanduser()
        # Inside as the dataset reader sees it: by the path's own parts, a linked blob/ included.
        if root is not None and not is_lexically_inside(self.blob_dir.absolute(), root.absolute()):
            raise ConfigError(
                f"tracing: blob_dir {str(self.blob_dir)!r} is outside the dataset root "
                f"{str(root)!r}; workloads name their blobs relative to the root, so put "
                "blob_dir inside it (default: <root>/blob/workloads)"
            )
        self._told_layout = False
        if rules is None:
            self.rules = full_preset()
            self.default_rule = default_rule if default_rule is not None else axes_only_rule
        else:
            self.rules = dict(rules)
            self.default_rule = default_rule
        for name, rule in self.rules.items():
            if not isinstance(rule, TracingRule):
                raise TypeError(f"tracing rule for {name!r}: found {rule!r}, expected TracingRule")
        self._definitions: dict[str, Any] | None = (
            dict(definitions) if definitions is not None else None
        )
        self._entries: list[TraceEntry] = []
        self._order = 0
        self._graph_depth = 0
        self._lock = threading.Lock()
        self.closed = False
        self.skipped: dict[str, str] = {}

    # --- definitions ----------------------------------------------------------------------

    def _definition(self, def_name: str) -> Any:
        if self._definitions is None:
            found = kit_definitions()
            root = self.dataset_root or dataset_env_path()  # its definitions, wherever records go
            if root is not None and (root / "definitions").is_dir():
                found.update(_dataset_definitions(root))
            self._definitions = found
        return self._definitions.get(def_name)

    # --- collecting -----------------------------------------------------------------------

    def collect(self, def_name: str, runtime_args: Mapping[str, Any]) -> TraceEntry | None:
        """Record one call (its axes, the rule's tensors, its scalars); None if not traced."""
        if self.closed:
            return None
        rule = self.rules.get(def_name, self.default_rule)
        if rule is None:
            return None
        definition = self._definition(def_name)
        if definition is None:
            self.skipped.setdefault(def_name, "no definition of that name")
            return None
        axes = {}
        for axis, (inp, dim) in definition.var_axis_bindings.items():
            shape = getattr(runtime_args.get(inp), "shape", None)
            if shape is None or len(shape) <= dim:
                self.skipped.setdefault(def_name, f"input {inp!r} missing (axis {axis!r})")
                return None
            axes[axis] = int(shape[dim])
        pending = self._graph_depth > 0 or _capturing()
        picked = {}
        for name in rule.names_to_dump(runtime_args):
            if name not in definition.inputs:
                continue
            tensor = runtime_args[name]
            picked[name] = tensor if pending else tensor.detach().to("cpu", copy=True)
        scalars = {}
        for name, spec in definition.inputs.items():
            if spec.shape is None and name in runtime_args:
                value = runtime_args[name]
                if hasattr(value, "item") and not pending:
                    value = value.item()
                if isinstance(value, (bool, int, float)):
                    scalars[name] = value
        with self._lock:
            entry = TraceEntry(
                def_name=def_name,
                axes=axes,
                definition_input_names=list(definition.inputs),
                picked=picked,
                order=self._order,
                scalars=scalars,
                pending=pending,
            )
            self._order += 1
            self._entries.append(entry)
        return entry

    @property
    def entries(self) -> list[TraceEntry]:
        """The entries collected since the last flush (a copy of the list)."""
        with self._lock:
            return list(self._entries)

    @contextlib.contextmanager
    def cuda_graph_scope(self) -> Iterator[Tracer]:
        """Calls inside keep live tensor references (safe during CUDA graph capture)::

        with tracer.cuda_graph_scope():
            with torch.cuda.graph(g):
                model(x)
        g.replay()
        tracer.snapshot_graph_tensors()
        """
        self._graph_depth += 1
        try:
            yield self
        finally:
            self._graph_depth -= 1

    def snapshot_graph_tensors(self) -> int:
        """Copy the tensors of entries recorded under capture to the CPU; returns how many
        entries were read. Call after a replay, when the buffers hold the replayed values."""
        with self._lock:
            pending = [e for e in self._entries if e.pending]
        for entry in pending:
            entry.picked = {n: t.detach().to("cpu", copy=True) for n, t in entry.picked.items()}
            entry.scalars = {
                n: (v.item() if hasattr(v, "item") else v) for n, v in entry.scalars.items()
            }
            entry.pending = False
        return len(pending)

    # --- writing --------------------------------------------------------------------------

    def flush(self) -> dict[str, dict[str, int]]:
        """Deduplicate and write the collected entries; returns counts per definition."""
        if self._graph_depth == 0:
            self.snapshot_graph_tensors()
        with self._lock:
            entries, self._entries = self._entries, []
        by_def: dict[str, list[TraceEntry]] = {}
        for entry in entries:
            by_def.setdefault(entry.def_name, []).append(entry)
        stats: dict[str, dict[str, int]] = {}
        for def_name, group in by_def.items():
            rule = self.rules.get(def_name, self.default_rule)
            kept = rule.select(group) if rule is not None else []
            records, blobs = self._records(def_name, kept)
            if records:
                op_type = self._definition(def_name).op_type
                append_jsonl(self.out_dir / op_type / f"{def_name}.jsonl", records)
            stats[def_name] = {"collected": len(group), "written": len(records), "blobs": blobs}
        return stats

    def _records(self, def_name: str, kept: list[TraceEntry]) -> tuple[list[Any], int]:
        definition = self._definition(def_name)
        records = []
        blobs = 0
        for entry in kept:
            workload_id = str(uuid.uuid4())
            inputs: dict[str, Any] = {}
            if entry.picked:
                path = (
                    self.blob_dir
                    / definition.op_type
                    / def_name
                    / f"{def_name}_{workload_id}.safetensors"
                )
                save_blob(path, entry.picked)
                blobs += 1
                ref = self._blob_ref(path)
            for name in definition.inputs:
                if name in entry.picked:
                    inputs[name] = SafetensorsInput(path=ref, tensor_key=name)
                elif name in entry.scalars:
                    inputs[name] = ScalarInput(entry.scalars[name])
                else:
                    inputs[name] = RandomInput()
            workload = Workload(uuid=workload_id, axes=dict(entry.axes), inputs=inputs)
            records.append(Trace(definition=def_name, workload=workload))
        return records, blobs

    def _blob_ref(self, path: Path) -> str:
        """The record's path of a blob: relative to the dataset root, or with none known, as
        it will read once ``blob_dir`` is the dataset's ``blob/workloads``."""
        if self.dataset_root is not None:  # inside it by the check in __init__
            return Path(os.path.relpath(path.absolute(), self.dataset_root.absolute())).as_posix()
        if not self._told_layout:
            self._told_layout = True
            warnings.warn(
                f"tracing: no dataset root known, so blob paths read 'blob/workloads/...': put "
                f"the records of {self.out_dir} under <dataset>/traces/workloads and the blobs "
                f"of {self.blob_dir} under <dataset>/blob/workloads (or pass dataset_root=)",
                stacklevel=2,
                category=FibWarning,
            )
        return (Path("blob") / "workloads" / path.relative_to(self.blob_dir)).as_posix()

    def close(self) -> dict[str, dict[str, int]]:
        """Flush and stop collecting."""
        stats = self.flush()
        self.closed = True
        return stats


def _capturing() -> bool:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return False
    try:
        return bool(torch.cuda.is_current_stream_capturing())
    except RuntimeError:
        return False


# --- the process-wide tracer ----------------------------------------------------------------

_tracer: Tracer | None = None
_previous_hook: Any = None
_exit_hooks_installed = False


def get_tracer() -> Tracer | None:
    """The enabled tracer, or None."""
    return _tracer


def enable_tracing(
    rules: Mapping[str, TracingRule] | None = None,
    out_dir: str | Path | None = None,
    blob_dir: str | Path | None = None,
    **tracer_options: Any,
) -> Tracer:
    """Start (or restart, flushing the old one) the process-wide tracer and hook it into apply.

    ``out_dir`` defaults to ``$FIB_DATASET_PATH/traces/workloads``, ``blob_dir`` to
    ``$FIB_DATASET_PATH/blob/workloads``; ``rules`` to the kit's per-definition preset::

        tracer = enable_tracing(out_dir="my-dataset/traces/workloads")
        model(...)            # every @apply function call is recorded
        disable_tracing()     # flush; also happens at exit and on SIGTERM
    """
    global _tracer, _previous_hook
    tracer = Tracer(rules, out_dir, blob_dir, **tracer_options)
    old = _tracer
    if old is not None:
        old.close()
    else:
        _previous_hook = get_apply_hook()
    _tracer = tracer
    set_apply_hook(make_tracing_hook(tracer))
    _install_exit_hooks()
    return tracer


def disable_tracing() -> dict[str, dict[str, int]]:
    """Flush and remove the process-wide tracer; returns the flush statistics ({} if none)."""
    global _tracer, _previous_hook
    tracer, _tracer = _tracer, None
    if tracer is None:
        return {}
    if getattr(get_apply_hook(), "tracer", None) is tracer:
        set_apply_hook(_previous_hook)
    _previous_hook = None
    return tracer.close()


def _flush_at_exit() -> None:
    tracer = _tracer
    if tracer is None or tracer.closed:
        return
    try:
        stats = tracer.flush()
    except Exception as err:  # at exit, a report beats a traceback nobody reads
        print(f"tracing: could not write workloads at exit: {err}", file=sys.stderr)
        return
    written = sum(s["written"] for s in stats.values())
    if written:
        print(f"tracing: wrote {written} workload(s) to {tracer.out_dir}", file=sys.stderr)


def _on_sigterm(signum: int, frame: Any) -> None:
    _flush_at_exit()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


_previous_sigterm: Any = None


def _install_exit_hooks() -> None:
    global _exit_hooks_installed, _previous_sigterm
    if _exit_hooks_installed:
        return
    atexit.register(_flush_at_exit)
    if threading.current_thread() is threading.main_thread():
        _previous_sigterm = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)
    _exit_hooks_installed = True
