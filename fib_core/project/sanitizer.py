"""``--sanitize [memcheck|racecheck|initcheck|synccheck]``: one workload under
compute-sanitizer, its findings mapped to the solution's own files.

The child process (:mod:`fib_core.project.debug_run`) makes one call of the solution;
compute-sanitizer reports each finding as a block of ``=========`` lines: the kind
("Invalid __global__ read of size 4 bytes"), where ("at kernel+0x1b0 in /path/kernel.py:42"),
the thread and block, and the address. Paths of the solution's private build copy are
rewritten to ``solution/<language>/...`` so each finding names the contestant's file and line.

Example::

    findings = parse_findings(output, "solution/triton")
    print(findings[0].line())   # Invalid __global__ read ... at solution/triton/kernel.py:42
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fib_core.compile.source_map import map_solution_paths
from fib_core.errors import ConfigError

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
PREFIX = "========="
_LOCATION = re.compile(r"\bin (?P<file>[^\s:]+\.(?:py|cu|cuh|cpp|cc|h|hpp|ptx)):(?P<line>\d+)")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error")
# Lines that open a finding (the rest of a block adds detail to it).
_KINDS = re.compile(
    r"^(Invalid |Uninitialized |Race reported|Barrier error|Program hit |Out-of-range|"
    r"Misaligned |Malloc/Free error|Error: |Leaked |Unused memory|.* hazard)"
)


def sanitizer_command(
    child: list[str], tool: str = "memcheck", binary: str = "compute-sanitizer"
) -> list[str]:
    """The command that runs ``child`` under ``tool`` (errors make it exit non-zero)."""
    if tool not in TOOLS:
        raise ConfigError(f"--sanitize {tool}: expected one of {', '.join(TOOLS)}")
    return [
        binary,
        "--tool",
        tool,
        "--print-limit",
        "20",
        "--error-exitcode",
        "99",
        "--target-processes",
        "all",
        *child,
    ]


@dataclass
class Finding:
    """One sanitizer finding: its kind and, when the report says, the source file and line."""

    kind: str
    file: str | None = None
    line_no: int | None = None
    detail: str = ""

    def line(self) -> str:
        where = f" at {self.file}:{self.line_no}" if self.file else ""
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.kind}{where}{extra}"


def parse_findings(output: str, source_dir: str | None = None) -> list[Finding]:
    """The findings in compute-sanitizer's output, in order, paths mapped to ``source_dir``."""
    findings: list[Finding] = []
    for raw in output.splitlines():
        if not raw.startswith(PREFIX):
            continue
        text = map_solution_paths(raw[len(PREFIX) :].strip(), source_dir)
        if not text or _SUMMARY.search(text) or text.startswith("COMPUTE-SANITIZER"):
            continue
        if _KINDS.match(text):
            findings.append(Finding(kind=text))
            continue
        if not findings:
            continue
        current = findings[-1]
        match = _LOCATION.search(text)
        if match and current.file is None:
            current.file = _in_solution(match.group("file"), source_dir)
            current.line_no = int(match.group("line"))
        elif text.startswith("Address ") and not current.detail:
            current.detail = text
    return findings


def _in_solution(file: str, source_dir: str | None) -> str:
    """A bare file name is one of the solution's own files: Triton's line tables carry only the
    name (``kernel.py``), so it is shown under the solution's folder (``solution/triton/...``)."""
    if source_dir and "/" not in file and "\\" not in file:
        return f"{source_dir.rstrip('/')}/{file}"
    return file


def error_count(output: str) -> int | None:
    """The "ERROR SUMMARY: N errors" figure, or None when the tool did not finish."""
    match = _SUMMARY.search(output)
    return int(match.group(1)) if match else None
