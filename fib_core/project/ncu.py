"""``--ncu [SECTIONS]``: one workload under Nsight Compute, only the solution's kernels.

The child process (:mod:`fib_core.project.debug_run`) wraps the solution's one call in the NVTX
range ``fib_solution``; ``ncu --nvtx --nvtx-include fib_solution/`` then profiles the kernels
launched inside it and none of the harness's (input generation, reference, checks). The
report is written to ``<dir>/<uuid8>.ncu-rep`` (open it in ``ncu-ui``), then read back with
``ncu --import ... --page raw --csv`` for a short summary per kernel: duration, achieved DRAM
bandwidth, achieved occupancy, and the top warp stall reasons.

Example::

    cmd = profile_command(Path("prof/3f2a91c0"), child, sections=None)
    summary = summarize_raw_csv(subprocess.run(import_command(rep), ...).stdout)
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from fib_core.errors import ConfigError
from fib_core.project.debug_run import NVTX_RANGE

DEFAULT_SECTIONS = ("SpeedOfLight", "Occupancy", "MemoryWorkloadAnalysis", "WarpStateStats")
BANDWIDTH = "dram__bytes.sum.per_second"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DURATION = "gpu__time_duration.sum"
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
_STALL = re.compile(re.escape(STALL_PREFIX) + r"(\w+?)" + re.escape(STALL_SUFFIX) + "$")
TOP_STALLS = 3
# Bytes per second of each unit ncu prints for a bandwidth.
_BYTE_UNITS = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12}
_TIME_UNITS = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}


def parse_sections(text: str | None) -> tuple[str, ...]:
    """``--ncu`` value -> section names (comma-separated; empty or "default" = the defaults)."""
    if not text or text == "default":
        return DEFAULT_SECTIONS
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9_]+", name):
            raise ConfigError(
                f"--ncu {text}: section {name!r} is not a section name; use names such as "
                f"{','.join(DEFAULT_SECTIONS)} (`ncu --list-sections` lists them)"
            )
    return names


def profile_command(
    report: Path,
    child: list[str],
    sections: tuple[str, ...] = DEFAULT_SECTIONS,
    ncu: str = "ncu",
) -> list[str]:
    """The ``ncu`` command that profiles ``child`` (a Python command line) into ``report``."""
    cmd = [ncu, "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/", "--target-processes", "all"]
    for name in sections:
        cmd += ["--section", name]
    # One --metrics list (a repeated flag may replace the first): the figures of the summary,
    # and every per-issue stall-reason ratio by regular expression.
    stalls = f"regex:^{STALL_PREFIX}.*{re.escape(STALL_SUFFIX)}$"
    cmd += ["--metrics", ",".join([BANDWIDTH, OCCUPANCY, DURATION, stalls])]
    cmd += ["--force-overwrite", "--export", str(report)]
    return cmd + list(child)


def import_command(report: Path, ncu: str = "ncu") -> list[str]:
    """Read every collected metric back as CSV (one row per profiled kernel)."""
    return [ncu, "--import", str(report), "--page", "raw", "--csv"]


@dataclass
class KernelSummary:
    """One profiled kernel's headline figures (None when not collected)."""

    name: str
    duration_ms: float | None = None
    bandwidth_gbs: float | None = None
    occupancy_pct: float | None = None
    stalls: list[tuple[str, float]] = field(default_factory=list)  # (reason, cycles/issue)

    def line(self) -> str:
        parts = [self.name[:60]]
        if self.duration_ms is not None:
            parts.append(f"{self.duration_ms * 1e3:.2f} us")
        if self.bandwidth_gbs is not None:
            parts.append(f"DRAM {self.bandwidth_gbs:.1f} GB/s")
        if self.occupancy_pct is not None:
            parts.append(f"occupancy {self.occupancy_pct:.1f}%")
        if self.stalls:
            parts.append(
                "stalls: " + ", ".join(f"{reason} {value:.2f}" for reason, value in self.stalls)
            )
        return "  ".join(parts)


def summarize_raw_csv(text: str) -> list[KernelSummary]:
    """Parse ``ncu --import R --page raw --csv``: a header row of metric names, a row of units,
    then one row per kernel."""
    rows = list(csv.reader(io.StringIO(_from_header(text))))
    if len(rows) < 2:
        return []
    header, units, data = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    out = []
    for row in data:
        if len(row) < len(header):
            continue
        name = row[col["Kernel Name"]] if "Kernel Name" in col else row[0]
        summary = KernelSummary(name=name)
        if DURATION in col:
            value = _number(row[col[DURATION]])
            scale = _TIME_UNITS.get(units[col[DURATION]].strip().lower())
            if value is not None and scale is not None:
                summary.duration_ms = value * scale
        if BANDWIDTH in col:
            value = _number(row[col[BANDWIDTH]])
            unit = units[col[BANDWIDTH]].strip().lower().split("/")[0]
            if value is not None and unit in _BYTE_UNITS:
                summary.bandwidth_gbs = value * _BYTE_UNITS[unit] / 1e9
        if OCCUPANCY in col:
            summary.occupancy_pct = _number(row[col[OCCUPANCY]])
        stalls = []
        for metric, i in col.items():
            match = _STALL.match(metric)
            value = _number(row[i]) if match else None
            if match and value:
                stalls.append((match.group(1), value))
        stalls.sort(key=lambda item: item[1], reverse=True)
        summary.stalls = stalls[:TOP_STALLS]
        out.append(summary)
    return out


def _from_header(text: str) -> str:
    """Drop ncu's "==PROF==" chatter before the CSV header."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith('"ID"') or line.startswith("ID,"):
            return "\n".join(lines[i:])
    return text


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (ValueError, AttributeError):
        return None
