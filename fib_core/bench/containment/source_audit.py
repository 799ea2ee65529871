"""A static audit of solution sources for known tampering patterns (warnings, never a block).

The engine contains a hostile solution at run time (:mod:`fib_core.bench.containment.sandbox`,
:mod:`fib_core.bench.evaluation.judge`); this audit tells a contestant (or a reviewer of an AI-written
kernel) *before* the run that the code does something a kernel has no business doing: walking
frames or the garbage collector, patching the harness, torch or the profiler, reaching into the
harness's modules or its connection, writing files under the dataset or the cache, starting
processes that leave the session, changing process-wide state. Each finding names file:line.

Example::

    from fib_core.bench.containment.source_audit import audit_sources
    for finding in audit_sources([("main.py", source_text)]):
        print(finding)   # main.py:12: frame introspection (sys._getframe) ...
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

HARNESS_PREFIXES = ("fib_core", "flashinfer_bench")
PATCHED_ROOTS = ("torch", "triton", "fib_core", "flashinfer_bench", "numpy", "sys", "builtins")
_FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "cr_frame"}
_INTROSPECTION_CALLS = {
    ("sys", "_getframe"): "frame introspection",
    ("inspect", "currentframe"): "frame introspection",
    ("inspect", "stack"): "frame introspection",
    ("inspect", "getouterframes"): "frame introspection",
    ("gc", "get_objects"): "garbage-collector introspection",
    ("gc", "get_referrers"): "garbage-collector introspection",
    ("gc", "get_referents"): "garbage-collector introspection",
}
_WRITE_METHODS = {"write_text", "write_bytes", "unlink", "rmdir", "rename", "touch"}
_FS_CALLS = {
    ("os", "remove"),
    ("os", "unlink"),
    ("os", "rename"),
    ("os", "replace"),
    ("os", "rmdir"),
    ("shutil", "rmtree"),
    ("shutil", "move"),
    ("os", "truncate"),
}
_PROCESS_CALLS = {
    ("os", "fork"): "forks the process",
    ("os", "setsid"): "leaves its session",
    ("os", "setpgid"): "leaves its process group",
    ("os", "chdir"): "changes the working directory",
    ("os", "putenv"): "changes the environment",
    ("os", "write"): "writes to a raw file descriptor (the engine's connection?)",
    ("os", "kill"): "sends signals to processes",
}
_DATA_WORDS = re.compile(
    r"traces|workloads|definitions|FIB_CACHE_DIR|\.cache/fib_core|reference", re.IGNORECASE
)


@dataclass(frozen=True)
class Finding:
    """One suspicious construct: where, and why it matters."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def audit_sources(files: Iterable[tuple[str, str]]) -> list[Finding]:
    """Findings for (path, text) pairs; Python files are parsed, others scanned by text."""
    findings: list[Finding] = []
    for path, text in files:
        if path.endswith(".py"):
            findings += _audit_python(path, text)
        else:
            findings += _audit_text(path, text)
    return findings


def audit_solution(solution: Any) -> list[Finding]:
    """Findings for a Solution's sources (its ``sources`` records: path + content)."""
    return audit_sources((s.path, s.content) for s in getattr(solution, "sources", []))


def _audit_text(path: str, text: str) -> list[Finding]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if re.search(r"\b(fork|setsid|execv|system|popen)\s*\(", line):
            out.append(Finding(path, number, "starts or detaches processes from native code"))
        if re.search(r"\bfopen\s*\(.*\"[wa]", line) and _DATA_WORDS.search(line):
            out.append(Finding(path, number, "writes files under the dataset or cache"))
    return out


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.aliases: dict[str, str] = {}  # local name -> module it stands for
        self.found: list[Finding] = []

    def add(self, node: ast.AST, message: str) -> None:
        self.found.append(Finding(self.path, getattr(node, "lineno", 0), message))

    def _resolve(self, dotted: str | None) -> str | None:
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    # imports ----------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.aliases[(alias.asname or alias.name).split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )
            self._harness(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
        self._harness(node, module)
        if module in ("sys", "inspect", "gc"):
            for alias in node.names:
                if (module, alias.name) in _INTROSPECTION_CALLS:
                    self.add(
                        node,
                        f"{_INTROSPECTION_CALLS[(module, alias.name)]} "
                        f"({module}.{alias.name}) can read the harness's objects",
                    )

    def _harness(self, node: ast.AST, module: str) -> None:
        if module.split(".")[0] in HARNESS_PREFIXES:
            self.add(node, f"imports the benchmark harness ({module}); a kernel needs none of it")

    # patching -----------------------------------------------------------------------------------

    def _assigned(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            name = self._resolve(_dotted(target))
            if name and name.split(".")[0] in PATCHED_ROOTS:
                self.add(
                    node,
                    f"patches {name} (monkeypatching torch, the profiler or the "
                    "harness changes what the benchmark measures)",
                )
        elif isinstance(target, ast.Subscript):
            name = self._resolve(_dotted(target.value))
            if name in ("sys.modules", "os.environ"):
                self.add(node, f"changes {name} (process-wide state shared with the harness)")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._assigned(element, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assigned(target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assigned(node.target, node)
        self.generic_visit(node)

    # calls and attributes -----------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _FRAME_ATTRS:
            self.add(node, f"frame introspection (.{node.attr}) can read the harness's objects")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self._resolve(_dotted(node.func)) or ""
        pair = tuple(name.rsplit(".", 1)) if "." in name else ("", name)
        if pair in _INTROSPECTION_CALLS:
            self.add(node, f"{_INTROSPECTION_CALLS[pair]} ({name}) can read the harness's objects")
        if pair in _PROCESS_CALLS:
            self.add(node, f"{_PROCESS_CALLS[pair]} ({name})")
        if name in ("setattr", "builtins.setattr") and node.args:
            target = self._resolve(_dotted(node.args[0]))
            if target and target.split(".")[0] in PATCHED_ROOTS:
                self.add(node, f"patches {target} via setattr")
        if pair in _FS_CALLS or (
            isinstance(node.func, ast.Attribute) and node.func.attr in _WRITE_METHODS
        ):
            self.add(
                node,
                f"changes files ({name or node.func.attr}); the dataset and cache are off limits",
            )
        if name in ("open", "io.open", "builtins.open") and _writes(node):
            self.add(node, "opens a file for writing; the dataset and cache are off limits")
        if any(k.arg == "start_new_session" for k in node.keywords) or name.endswith("daemon"):
            self.add(node, "starts a process outside the worker's session")
        if name.endswith("socket.socket") and any(k.arg == "fileno" for k in node.keywords):
            self.add(node, "wraps a raw file descriptor in a socket (the engine's connection?)")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and ("FIB_CACHE_DIR" in node.value or "--fd" == node.value):
            self.add(node, f"refers to the harness's {node.value!r}")


def _writes(call: ast.Call) -> bool:
    mode = (
        call.args[1]
        if len(call.args) > 1
        else next((k.value for k in call.keywords if k.arg == "mode"), None)
    )
    return (
        isinstance(mode, ast.Constant)
        and isinstance(mode.value, str)
        and any(c in mode.value for c in "wax+")
    )


def _audit_python(path: str, text: str) -> list[Finding]:
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError:
        return []  # the build reports it
    visitor = _Visitor(path)
    visitor.visit(tree)
    seen: set[tuple[int, str]] = set()
    unique = []
    for f in visitor.found:
        if (f.line, f.message) not in seen:
            seen.add((f.line, f.message))
            unique.append(f)
    return sorted(unique, key=lambda f: (f.path, f.line))
