"""The categories ``validate`` runs without evaluating anything: layout, definition, workload,
solution, trace and baseline (the organizers' list, see docs/validate.md).

Each check takes one :class:`~fib_core.validate.context.DefinitionContext` and returns its
messages. An ``error`` or ``warning`` message is one line: the file (relative to the dataset
root, with the line for JSONL files), the field, what is wrong, and what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from safetensors import SafetensorError, safe_open

from fib_core.data.blobs import resolve_blob_path
from fib_core.data.dataset_layout import path_segment
from fib_core.data.workload_checks import check_workload
from fib_core.errors import FibError, SchemaError, is_lfs_pointer
from fib_core.validate.context import DefinitionContext
from fib_core.validate.report import CheckMessage
from fib_core.validate.scan import Record

BASELINE_AUTHOR = "baseline"


def error(where: str, field: str, problem: str, fix: str) -> CheckMessage:
    return CheckMessage(level="error", message=f"{where}: {field}: {problem}; {fix}")


def warning(where: str, field: str, problem: str, fix: str) -> CheckMessage:
    return CheckMessage(level="warning", message=f"{where}: {field}: {problem}; {fix}")


def failure(line: str) -> CheckMessage:
    """An error whose line is already complete (a schema error names file, field and want)."""
    return CheckMessage(level="error", message=line)


def info(text: str) -> CheckMessage:
    return CheckMessage(level="info", message=text)


# --- layout ----------------------------------------------------------------------------------


def check_layout(ctx: DefinitionContext) -> list[CheckMessage]:
    """Files where their fields say they belong; every blob a workload names is there."""
    out: list[CheckMessage] = []
    recs = ctx.definition_records
    for extra in recs[1:]:
        out.append(error(extra.file, "name", f"{ctx.name!r} is also declared by {recs[0].file}",
                         "remove one of the two files or rename one definition"))
    op = ctx.op_type
    if ctx.definition is None or op is None:
        return out  # the definition category says why it did not load
    for rec in recs:
        out += _placed(rec, ["definitions", op, f"{ctx.name}.json"], {1: ("op_type", op)})
    for file in sorted({r.file for r in ctx.workloads if Path(r.file).stem == ctx.name}):
        out += _placed(Record(file, None), ["workloads", op, f"{ctx.name}.jsonl"],
                       {1: ("op_type", op)})  # a record in another's file: said per record
    for folder, records in (("workloads", ctx.workloads), ("traces/<author>", ctx.traces)):
        for rec in records:
            named = getattr(rec.value, "definition", None)
            if named is not None and Path(rec.file).stem != named:
                out.append(error(rec.where, "definition", f"{named!r} in the file of "
                                 f"{Path(rec.file).stem}", f"move the record to {folder}/{op}/"
                                 f"{named}.jsonl or fix the field"))
    for rec in ctx.solutions:
        if rec.value is not None:
            out += _solution_path(rec, op)
    for file in sorted({r.file for r in ctx.traces}):
        parts = file.split("/")
        if len(parts) == 4 and parts[2] != op:
            out.append(error(file, "op_type", f"the file is under {parts[2]}/ but {ctx.name} is "
                             f"op_type {op!r}", f"move it to traces/{parts[1]}/{op}/"))
        elif len(parts) not in (3, 4):
            out.append(warning(file, "path", "not where traces are read from",
                               f"move it to traces/<author>/{op}/{ctx.name}.jsonl"))
    out += _blobs(ctx)
    return out


def _placed(rec: Record, expected: list[str], fields: dict[int, tuple[str, str]]
            ) -> list[CheckMessage]:
    """``rec.file`` against its expected path parts (``fields``: which part is which field)."""
    parts = rec.file.split("/")
    want = "/".join(expected)
    if len(parts) != len(expected):
        return [warning(rec.file, "path", f"expected {want}", "move the file there (the "
                        "organizers' tools read only that layout)")]
    if parts[-1] != expected[-1]:
        return [error(rec.file, "name", f"the file is {parts[-1]} but the record says "
                      f"{expected[-1].rsplit('.', 1)[0]!r}", f"rename the file to {want}, or "
                      "fix the field")]
    for i, (field, value) in fields.items():
        if parts[i] != value:
            return [error(rec.file, field, f"is {value!r} but the file is under {parts[i]}/",
                          f"move the file to {want}, or fix the field")]
    return []


def _solution_path(rec: Record, op: str) -> list[CheckMessage]:
    """``solutions/<author>/[<op_type>/]<definition>/<name>.json`` (the kit writes the form
    without the op_type, the organizers' datasets the one with it): each part as its field."""
    sol = rec.value
    parts = rec.file.split("/")
    if len(parts) not in (4, 5):
        return [warning(rec.file, "path", "expected solutions/<author>/<definition>/<name>.json",
                        f"move it to solutions/{path_segment(sol.author)}/{sol.definition}/"
                        f"{path_segment(sol.name)}.json")]
    checks = [("author", parts[1], path_segment(sol.author)),
              ("definition", parts[-2], sol.definition),
              ("name", Path(parts[-1]).stem, path_segment(sol.name))]
    if len(parts) == 5:
        checks.insert(1, ("op_type", parts[2], op))
    for field, found, wanted in checks:
        if found != wanted:
            return [error(rec.file, field, f"the record says {wanted!r}, the path {found!r}",
                          "move the file to the folder its fields name, or fix the field")]
    return []


def _blobs(ctx: DefinitionContext) -> list[CheckMessage]:
    out = []
    for rec, name, source in _safetensors_inputs(ctx):
        field = f"workload.inputs.{name}.path"
        try:
            path = resolve_blob_path(ctx.root, source.path)
        except FibError as err:
            out.append(error(rec.where, field, str(err), "fix the path"))
            continue
        if not path.is_file():
            out.append(error(rec.where, field, f"{source.path} does not exist", "run `git lfs "
                             "pull` in the dataset, or fix the path"))
        elif is_lfs_pointer(path):
            out.append(error(rec.where, field, f"{source.path} is a git-LFS pointer, not the "
                             "data", "run `git lfs pull` in the dataset"))
    return out


def _safetensors_inputs(ctx: DefinitionContext) -> list[tuple[Record, str, object]]:
    return [(rec, name, source) for rec in ctx.workloads if rec.value is not None
            for name, source in rec.value.workload.inputs.items()
            if getattr(source, "type", None) == "safetensors"]


# --- definition ------------------------------------------------------------------------------


def check_definition(ctx: DefinitionContext) -> list[CheckMessage]:
    """The schema (axes, shapes, constraints, reference syntax with a ``run``), and the
    descriptions a reader of the definition needs."""
    out = [failure(r.error) for r in ctx.definition_records if r.error]
    d = ctx.definition
    if d is None:
        return out
    file = next(r.file for r in ctx.definition_records if r.value is not None)
    if not (d.description or "").strip():
        out.append(warning(file, "description", "empty", f"add a sentence saying what {d.name} "
                           "computes"))
    for group, items in (("axes", d.axes), ("inputs", d.inputs), ("outputs", d.outputs)):
        for name, item in items.items():
            if not (item.description or "").strip():
                out.append(warning(file, f"{group}.{name}.description", "empty",
                                   "add a few words saying what it holds"))
    return out


# --- workload --------------------------------------------------------------------------------


def check_workloads(ctx: DefinitionContext) -> list[CheckMessage]:
    """Every workload record against its definition: axes, inputs, blobs' keys and shapes."""
    out: list[CheckMessage] = []
    d = ctx.definition
    seen: dict[str, str] = {}
    valid = 0
    for rec in ctx.workloads:
        if rec.error:
            out.append(failure(rec.error))
            continue
        trace = rec.value
        if not trace.is_workload_trace():
            out.append(error(rec.where, "solution", "a workload record holds a solution or "
                             "evaluation", "move it to traces/, or set both to null"))
            continue
        w = trace.workload
        if w.uuid in seen:
            out.append(error(rec.where, "workload.uuid", f"{w.uuid} is also used at "
                             f"{seen[w.uuid]}", "give each workload its own uuid"))
            continue
        seen[w.uuid] = rec.where
        if d is None:
            continue
        problems = _workload_problems(ctx, rec)
        out += problems
        valid += not problems
    if d is not None:
        out.append(info(f"{valid} valid"))
    return out


def _workload_problems(ctx: DefinitionContext, rec: Record) -> list[CheckMessage]:
    d, w = ctx.definition, rec.value.workload
    try:
        check_workload(d, w)
    except SchemaError as err:
        return [failure(str(err.located(rec.file, rec.line)))]
    out = []
    for axis, value in w.axes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            out.append(error(rec.where, f"workload.axes.{axis}", f"found {value!r}",
                             "axis values are whole numbers above 0"))
    for name, spec in d.inputs.items():
        if name not in w.inputs and not spec.optional:
            out.append(error(rec.where, "workload.inputs", f"no entry for {name!r}",
                             'add it ({"type": "random"}, "scalar" or "safetensors")'))
    if out:
        return out
    shapes = d.input_shapes(dict(w.axes))
    for name, source in w.inputs.items():
        if getattr(source, "type", None) == "safetensors":
            out += _blob_tensor(ctx, rec, name, source, shapes.get(name))
    return out


def _blob_tensor(ctx: DefinitionContext, rec: Record, name: str, source: object,
                 shape: tuple[int, ...] | None) -> list[CheckMessage]:
    """The blob's tensor key and shape (read from the file's header; a missing file is a
    layout finding)."""
    try:
        path = resolve_blob_path(ctx.root, source.path)
    except FibError:
        return []
    if not path.is_file() or is_lfs_pointer(path):
        return []
    field = f"workload.inputs.{name}"
    try:
        shapes = blob_shapes(path)
    except (OSError, ValueError) as err:
        return [error(rec.where, f"{field}.path", f"{source.path} is not a safetensors file "
                      f"({str(err).splitlines()[0][:120]})", "write the blob again")]
    key = source.tensor_key
    if key not in shapes:
        return [error(rec.where, f"{field}.tensor_key", f"{key!r} is not in {source.path} (it "
                      f"has {', '.join(sorted(shapes)[:6]) or 'none'})", "fix the key")]
    if shape is not None and tuple(shapes[key]) != tuple(shape):
        return [error(rec.where, field, f"the blob's tensor is {list(shapes[key])}, the "
                      f"definition makes it {list(shape)}", "fix the workload's axes or the "
                      "blob")]
    return []


def blob_shapes(path: Path) -> dict[str, list[int]]:
    """Tensor key -> shape of a safetensors file, from its header alone (no tensor is read)."""
    try:
        with safe_open(str(path), framework="numpy") as fh:
            return {key: list(fh.get_slice(key).get_shape()) for key in fh.keys()}
    except SafetensorError as err:
        raise ValueError(str(err)) from None


# --- solution --------------------------------------------------------------------------------


def check_solutions(ctx: DefinitionContext) -> list[CheckMessage]:
    """Each solution file parses (entry point ``file::function`` in its sources, sources not
    empty); where it lies is the layout's concern."""
    out = [failure(r.error) for r in ctx.solutions if r.error]
    out.append(info(f"{sum(r.value is not None for r in ctx.solutions)} solutions"))
    return out


# --- trace -----------------------------------------------------------------------------------


def check_traces(ctx: DefinitionContext) -> list[CheckMessage]:
    """Trace records: evaluated, of a known solution and workload; each author's coverage."""
    out: list[CheckMessage] = []
    uuids = ctx.workload_uuids()
    covered: dict[str, set[str]] = {}
    for rec in ctx.traces:
        if rec.error:
            out.append(failure(rec.error))
            continue
        t = rec.value
        if t.is_workload_trace():
            out.append(error(rec.where, "evaluation", "a bare workload record in traces/",
                             f"move it to workloads/{ctx.op_type or '<op_type>'}/{ctx.name}.jsonl"))
            continue
        if t.solution not in ctx.all_solution_names:
            out.append(error(rec.where, "solution", f"{t.solution!r} is not in solutions/",
                             "add its solution file, or remove the trace"))
            continue
        if uuids and t.workload.uuid not in uuids:
            out.append(warning(rec.where, "workload.uuid", f"{t.workload.uuid} is not a "
                               f"workload of {ctx.name}", "remove the trace, or add the workload"))
            continue
        covered.setdefault(_author_folder(rec), set()).add(t.workload.uuid)
    for author, got in sorted(covered.items()):
        if uuids and len(got) < len(uuids):
            out.append(warning(f"traces/{author}/", ctx.name, f"{len(got)} of {len(uuids)} "
                               "workloads traced", "run the others (python -m fib_core run "
                               f"--local DATASET --definitions {ctx.name})"))
    out.append(info(f"{len(ctx.traces)} traces"))
    return out


def _author_folder(rec: Record) -> str:
    parts = rec.file.split("/")
    return parts[1] if len(parts) == 4 else "(no author folder)"


# --- baseline --------------------------------------------------------------------------------


def check_baseline(ctx: DefinitionContext) -> list[CheckMessage]:
    """A baseline solution and its traces: present, passing, covering every workload."""
    out: list[CheckMessage] = []
    solutions = {r.value.name for r in ctx.solutions if r.value is not None
                 and (r.file.split("/")[1] == BASELINE_AUTHOR or r.value.author == BASELINE_AUTHOR)}
    if not solutions:
        out.append(warning(f"solutions/{BASELINE_AUTHOR}/", ctx.name, "no baseline solution",
                           f"add one under solutions/{BASELINE_AUTHOR}/ so speedups have a "
                           "reference"))
    else:
        out.append(info(f"solution: {', '.join(sorted(solutions))}"))
    traces = [r for r in ctx.traces if r.value is not None and _author_folder(r) == BASELINE_AUTHOR
              and not r.value.is_workload_trace()]
    if not traces:
        out.append(warning(f"traces/{BASELINE_AUTHOR}/", ctx.name, "no baseline traces",
                           "run the baseline solution and keep its traces"))
        return out
    foreign = [r for r in traces if r.value.solution not in solutions]
    for rec in foreign:
        out.append(error(rec.where, "solution", f"{rec.value.solution!r} is not a baseline "
                         f"solution", f"move the trace out of traces/{BASELINE_AUTHOR}/, or add "
                         f"the solution under solutions/{BASELINE_AUTHOR}/"))
    failed = [r for r in traces if not r.value.is_successful()]
    if failed:
        statuses = sorted({str(r.value.evaluation.status.value) for r in failed})
        out.append(warning(failed[0].where, "evaluation.status", f"{len(failed)} of "
                           f"{len(traces)} baseline traces did not pass ({', '.join(statuses)})",
                           "run the baseline again and replace those traces"))
    else:
        out.append(info("trace: all passed"))
    uuids = ctx.workload_uuids()
    got = {r.value.workload.uuid for r in traces} & uuids
    if uuids and len(got) < len(uuids):
        out.append(warning(traces[0].file, ctx.name, f"baseline traces cover {len(got)} of "
                           f"{len(uuids)} workloads", "run the baseline on the others"))
    elif uuids:
        out.append(info(f"trace: {len(got)}/{len(uuids)} workloads"))
    return out


CPU_CHECKS: dict[str, Callable[[DefinitionContext], list[CheckMessage]]] = {
    "layout": check_layout,
    "definition": check_definition,
    "workload": check_workloads,
    "solution": check_solutions,
    "trace": check_traces,
    "baseline": check_baseline,
}
