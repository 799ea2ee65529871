"""Submission rules: does this solution fit what the organizers will build and score?

Each rule has an id, a reason and the source of that reason, and is checked on exactly what
will be submitted (the packed solution's sources plus ``[build]``). A finding is a *warning*
unless the contest forbids the thing (then an *error*, which stops ``submit.py``); a fork may
promote rules to errors, ignore them, or allow more packages in ``config.toml``::

    [audit]
    errors = ["flashinfer-calls"]        # treat as errors
    ignore = ["environment-packages"]    # do not check
    allowed_packages = ["numpy"]         # available to you on request

Only rules that are not ``forbidden`` can be ignored. The tampering audit of the benchmark
harness is another module's job; these rules are about contest compliance.

Example::

    from fib_core.project.submission_audit import audit_submission, AuditSettings
    for finding in audit_submission(solution, cfg, AuditSettings()):
        print(finding)
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.errors import ConfigError
from fib_core.project.config import closest

if TYPE_CHECKING:
    from fib_core.data import Solution
    from fib_core.project.config import KitConfig

WARNING = "warning"
ERROR = "error"

# The organizers' image: torch, triton, tilelang, CuTe-DSL (package `cutlass`), cuTile (in
# `cuda`, as `cuda.tile`); tvm_ffi is the loader their CUDA builder uses; `fib_core` is never
# there, but a solution importing it fails there, so it is not listed.
ANNOUNCED_PACKAGES = ("torch", "triton", "tilelang", "cutlass", "cuda", "tvm_ffi")
FLASHINFER_MODULES = ("flashinfer",)
VENDOR_MODULES = (
    "fla",
    "flash_attn",
    "deep_gemm",
    "sgl_kernel",
    "vllm",
    "xformers",
    "transformer_engine",
    "apex",
    "cudnn",
    "nvmath",
)
VENDOR_INCLUDES = re.compile(r'#\s*include\s*[<"]\s*(cublas\w*|cudnn\w*|cublasLt\w*)')
VENDOR_LINK = re.compile(r"-l(cublas\w*|cudnn\w*)")
FLASHINFER_INCLUDE = re.compile(r'#\s*include\s*[<"]\s*flashinfer')
ARCH = re.compile(r"\b(?:sm|compute)_(\d{2,3})([a-z]?)\b")
B200_ARCHES = {("100", "a"), ("100", "")}


@dataclass(frozen=True)
class Finding:
    """One rule hit: which rule, how serious, where, and what to do."""

    rule: str
    severity: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.where}: {self.message} [{self.rule}]"


@dataclass(frozen=True)
class Context:
    """What a rule looks at: the sources as packed, the build settings, allowed packages."""

    sources: list[tuple[str, str]]
    cfg: KitConfig
    allowed: frozenset[str]
    config_path: str

    def python_imports(self) -> list[tuple[str, int, str]]:
        """(path, line, top-level module) of every import in the Python sources."""
        found = []
        for path, text in self.sources:
            if not path.endswith(".py"):
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue  # the pack step reports syntax errors
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found += [(path, node.lineno, a.name.split(".")[0]) for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.append((path, node.lineno, node.module.split(".")[0]))
        return found

    def local_modules(self) -> set[str]:
        """Top-level names the solution's own files provide (``import chunk_prep``)."""
        names = set()
        for path, _ in self.sources:
            first = Path(path).parts[0]
            names.add(Path(first).stem if first.endswith(".py") else first)
        return names

    def text_lines(self) -> list[tuple[str, int, str]]:
        """(path, line number, line) of every source line."""
        return [
            (path, i, line)
            for path, text in self.sources
            for i, line in enumerate(text.splitlines(), 1)
        ]


@dataclass(frozen=True)
class Rule:
    """A submission rule; ``forbidden``: the contest rejects it, so always an error."""

    id: str
    summary: str
    reason: str
    source: str
    check: Callable[[Context], list[tuple[str, str]]]  # -> (where, message)
    forbidden: bool = False


def _environment(ctx: Context) -> list[tuple[str, str]]:
    known = set(sys.stdlib_module_names) | set(ANNOUNCED_PACKAGES) | ctx.allowed
    known |= ctx.local_modules() | set(FLASHINFER_MODULES) | set(VENDOR_MODULES)
    out = []
    for path, line, module in ctx.python_imports():
        if module not in known:
            out.append(
                (
                    f"{path}:{line}",
                    f"imports '{module}', which the organizers' image does not "
                    "announce; ask them for it or drop it (allowed_packages in [audit] if they "
                    "confirmed)",
                )
            )
    if ctx.cfg.build.dependencies:
        out.append(
            (
                f"{ctx.config_path} [{ctx.cfg.table}] dependencies",
                f"{ctx.cfg.build.dependencies}: the organizers' builders do not install dependencies",
            )
        )
    return out


def _imports(ctx: Context, modules: Any, why: str) -> list[tuple[str, str]]:
    """A finding per Python import of one of ``modules``: where, and why it matters."""
    return [
        (f"{path}:{line}", f"imports {module}: {why}")
        for path, line, module in ctx.python_imports()
        if module in modules
    ]


def _includes(
    ctx: Context, pattern: re.Pattern[str], why: Callable[[re.Match[str]], str]
) -> list[tuple[str, str]]:
    """A finding per source line ``pattern`` matches; ``why`` words it from the match."""
    return [
        (f"{path}:{line}", why(m))
        for path, line, text in ctx.text_lines()
        if (m := pattern.search(text)) is not None
    ]


def _flashinfer(ctx: Context) -> list[tuple[str, str]]:
    out = _imports(ctx, FLASHINFER_MODULES, "the score would be FlashInfer's kernel, not yours")
    out += _includes(
        ctx,
        FLASHINFER_INCLUDE,
        lambda _: "includes FlashInfer headers: the score would be FlashInfer's kernel",
    )
    return out


def _vendor(ctx: Context) -> list[tuple[str, str]]:
    out = _imports(ctx, VENDOR_MODULES, "another library's kernel would be what is scored")
    out += _includes(
        ctx, VENDOR_INCLUDES, lambda m: f"includes {m.group(1)}: a vendor library's kernel"
    )
    for flag in ctx.cfg.build.extra_ldflags:
        m = VENDOR_LINK.search(flag)
        if m:
            out.append((f"{ctx.config_path} [{ctx.cfg.table}] extra_ldflags", f"links {m.group(1)}"))
    return out


def _cuda_arch(ctx: Context) -> list[tuple[str, str]]:
    out = []
    build = ctx.cfg.build
    custom = [
        k
        for k in ("cuda_arch", "extra_cuda_cflags", "extra_cflags", "extra_ldflags", "include_dirs")
        if getattr(build, k)
    ]
    if custom:
        out.append(
            (
                f"{ctx.config_path} [{ctx.cfg.table}]",
                f"{', '.join(custom)} apply in this kit only: the organizers' builders do not yet "
                "honour custom compile flags (compile your CUDA from Python with "
                "torch.utils.cpp_extension.load() or tvm-ffi to control them)",
            )
        )
    values = [build.cuda_arch or "", *build.extra_cuda_cflags]
    places = [(f"{ctx.config_path} [{ctx.cfg.table}]", v) for v in values if v]
    places += [(f"{p}:{n}", t) for p, n, t in ctx.text_lines()]
    for where, text in places:
        for m in ARCH.finditer(text):
            if (m.group(1), m.group(2)) not in B200_ARCHES:
                out.append(
                    (
                        where,
                        f"targets {m.group(0)}; the grading GPU is a B200: sm_100a "
                        "(sm_100 lacks tcgen05/TMEM)",
                    )
                )
    return out


def _entry_point(ctx: Context) -> list[tuple[str, str]]:
    # Packing already checks the entry point and signature and raises; submit.py turns that
    # error into this rule's finding. Nothing more to check on the packed sources.
    return []


RULES: tuple[Rule, ...] = (
    Rule(
        "entry-point",
        "the entry point exists and its parameters fit the definition",
        "the organizers call entry_point with the definition's inputs (and outputs, in "
        "destination-passing style); a mismatch fails every workload",
        "FlashInfer-Trace Solution schema; contest evaluation guide",
        _entry_point,
        forbidden=True,
    ),
    Rule(
        "environment-packages",
        "imports only what the organizers' image holds",
        "the official image includes torch, triton, tilelang, CuTe-DSL and cuTile (other "
        "libraries on request) and the builders do not install dependencies: another import "
        "fails at grading",
        "contest evaluation guide and FAQ (environment)",
        _environment,
    ),
    Rule(
        "flashinfer-calls",
        "no calls into FlashInfer",
        "the baseline solutions are FlashInfer wrappers: calling FlashInfer scores its kernel, "
        "not yours",
        "dataset solutions/baseline/flashinfer_wrapper_*; contestants' compliance audits",
        _flashinfer,
    ),
    Rule(
        "vendor-kernels",
        "no vendor or third-party kernel libraries",
        "cuBLAS, cuDNN, flash-attention, flash-linear-attention, DeepGEMM and the like would "
        "make the measured kernel someone else's",
        "contest rules (the score is the contestant's kernel)",
        _vendor,
    ),
    Rule(
        "cuda-arch",
        "CUDA code is built for the B200 (sm_100a)",
        "grading runs on a B200; code for another architecture runs slower or fails there, "
        "and the organizers' builders ignore custom compile flags",
        "contest evaluation guide (machine, builders)",
        _cuda_arch,
    ),
)
RULE_IDS = tuple(r.id for r in RULES)


@dataclass(frozen=True)
class AuditSettings:
    """The ``[audit]`` table: rules promoted to errors, rules ignored, extra packages."""

    errors: frozenset[str] = field(default_factory=frozenset)
    ignore: frozenset[str] = field(default_factory=frozenset)
    allowed_packages: frozenset[str] = field(default_factory=frozenset)

    def severity(self, rule: Rule) -> str | None:
        """error / warning, or None when the rule is ignored."""
        if rule.forbidden or rule.id in self.errors:
            return ERROR
        return None if rule.id in self.ignore else WARNING


def audit_settings(path: Path, data: dict[str, Any]) -> AuditSettings:
    """Validate the ``[audit]`` table of parsed ``config.toml`` data (absent: defaults)."""
    table = data.get("audit") or {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [audit] must be a table")
    keys = ("errors", "ignore", "allowed_packages")
    values: dict[str, frozenset[str]] = {}
    for key, value in table.items():
        if key not in keys:
            guess = closest(key, keys)
            raise ConfigError(
                f"{path}: [audit] unknown key '{key}'"
                + (f"; did you mean '{guess}'?" if guess else f" (keys: {', '.join(keys)})")
            )
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: [audit] {key} must be a list of strings")
        values[key] = frozenset(value)
    for key in ("errors", "ignore"):
        for rule_id in values.get(key, ()):
            if rule_id not in RULE_IDS:
                guess = closest(rule_id, RULE_IDS)
                hint = f"did you mean '{guess}'? " if guess else ""
                raise ConfigError(
                    f"{path}: [audit] {key}: unknown rule '{rule_id}'; {hint}"
                    f"rules: {', '.join(RULE_IDS)}"
                )
    for rule in RULES:
        if rule.forbidden and rule.id in values.get("ignore", ()):
            raise ConfigError(
                f"{path}: [audit] ignore: '{rule.id}' cannot be ignored ({rule.reason})"
            )
    return AuditSettings(**values)


def audit_submission(solution: Solution, cfg: KitConfig, settings: AuditSettings) -> list[Finding]:
    """Every finding of the enabled rules on ``solution`` (as packed) and ``cfg``'s build."""
    ctx = Context(
        sources=[(s.path, s.content) for s in solution.sources],
        cfg=cfg,
        allowed=settings.allowed_packages,
        config_path=cfg.path.name,
    )
    findings = []
    for rule in RULES:
        severity = settings.severity(rule)
        if severity is None:
            continue
        findings += [Finding(rule.id, severity, w, m) for w, m in rule.check(ctx)]
    return findings
