"""The HTML report opened in a real headless Chromium at 1400 px, as a contestant opens it: the
plots render with tick labels that do not overlap, the workload table sorts and filters and
keeps its header in view, and nothing is logged to the console.

Skipped with a message where no Chromium is installed (Debian: ``apt-get install chromium``;
``.ci/run`` installs it).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from fib_core.bench.cross_check import CrossCheckRow
from fib_core.report import plots
from fib_core.report.browser import INSTALL_HINT, Page, find_browser, screenshot
from fib_core.report.html import ReportSection, build_html
from fib_core.report.ledger import GitState, new_record

pytestmark = pytest.mark.skipif(find_browser() is None, reason=INSTALL_HINT)

WIDTH = 1400
# Each plot's tick labels as boxes, and whether any two neighbours on one axis overlap.
_TICK_OVERLAPS = """
(() => Array.from(document.querySelectorAll('figure.plot svg')).map(svg => {
  const boxes = sel => Array.from(svg.querySelectorAll(sel))
    .filter(t => t.textContent.trim() !== '').map(t => t.getBoundingClientRect());
  const clash = (list, horizontal) => list.some((a, i) => list.slice(i + 1).some(b =>
    horizontal ? (a.left < b.right - 1 && b.left < a.right - 1 && Math.abs(a.top - b.top) < 4)
               : (a.top < b.bottom - 1 && b.top < a.bottom - 1 && Math.abs(a.left - b.left) < 40)));
  const x = boxes('g[id^="xtick_"] text'), y = boxes('g[id^="ytick_"] text');
  const r = svg.getBoundingClientRect();
  return {width: r.width, height: r.height, xticks: x.length, yticks: y.length,
          overlap: clash(x, true) || clash(y, false)};
}))()
"""
_VISIBLE = """
((column) => {
  const table = document.querySelector('table.workloads');
  const names = Array.from(table.tHead.rows[0].cells).map(th => th.textContent);
  const k = names.indexOf(column);
  return Array.from(table.tBodies[0].rows).filter(r => !r.hidden)
    .map(r => r.cells[k].getAttribute('data-v') ?? r.cells[k].textContent);
})
"""


# What could stick out of a 1400 px window: the page itself, a table's scroll box, a table
# outside one; and each legend against its panel (the axes' background patch), its figure and
# the tick and axis labels of its panel.
_FIT = """
(() => {
  const view = window.innerWidth, doc = document.documentElement;
  const boxes = Array.from(document.querySelectorAll('div.scroll')).map(b =>
    ({table: b.querySelector('table').className, scroll: b.scrollWidth, width: b.clientWidth}));
  const loose = Array.from(document.querySelectorAll('table, figure, pre, p, ul, div.filters'))
    .filter(el => !el.closest('div.scroll') && el.getBoundingClientRect().right > view + 1)
    .map(el => el.tagName + '.' + el.className);
  const meets = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 &&
                          a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const legends = Array.from(document.querySelectorAll('figure.plot svg g[id^="legend_"]'))
    .map(g => {
      const axes = g.closest('g[id^="axes_"]');
      const plot = axes.querySelector(':scope > g[id^="patch_"]').getBoundingClientRect();
      const box = g.getBoundingClientRect(), fig = g.ownerSVGElement.getBoundingClientRect();
      const labels = Array.from(axes.querySelectorAll('g[id^="matplotlib.axis_"] text'))
        .filter(t => t.textContent.trim() !== '').map(t => t.getBoundingClientRect());
      return {plot: g.ownerSVGElement.parentElement.dataset.plot, width: box.width,
              plotWidth: plot.width, inFigure: box.left >= fig.left - 1 &&
              box.right <= fig.right + 1 && box.bottom <= fig.bottom + 1,
              onLabels: labels.some(r => meets(r, box)),
              text: Array.from(g.querySelectorAll('text')).map(t => t.textContent).join(' ')};
    });
  return {view: view, scrollWidth: doc.scrollWidth, boxes: boxes, loose: loose,
          legends: legends};
})()
"""


def _click(page: Page, column: str) -> None:
    page.evaluate(
        "Array.from(document.querySelectorAll('table.workloads th'))"
        f".find(th => th.textContent === {column!r}).click()"
    )


def _visible(page: Page, column: str) -> list[str]:
    return page.evaluate(f"{_VISIBLE}({column!r})")


def _choose(page: Page, which: str, value: str) -> str:
    """Pick ``value`` in the status or shape filter; the filter's own count line after it."""
    return page.evaluate(
        f"(() => {{ const s = document.querySelector('div.filters select.{which}');"
        f" s.value = {value!r}; s.dispatchEvent(new Event('change'));"
        " return document.querySelector('div.filters .shown').textContent; })()"
    )


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def decode_html(mkrow, mkrun, spread) -> str:
    """A GDN decode GPU report: 4 batch sizes x 3 workloads, the baseline measured, one
    workload failing, a previous run and a history of three runs (two of one solution)."""
    def run(factor: float, solution: str, hour: int):
        rows = []
        for batch in (1, 4, 16, 64):
            for k in range(3):
                ms = (0.002 + 0.0003 * batch) * factor * (1 + 0.01 * k)
                ref = (2.0 + 2.5 * batch) * (1 + 0.4 * k)
                row = mkrow(f"b{batch}-{k}", latency=ms, speedup=ref / ms,
                           reference_latency_ms=ref, axes={"batch_size": batch},
                           spread=spread(ms * 0.97, ms * 1.04), floor_ms=ms * 0.6,
                           roofline_fraction=0.6, samples=150, timing_method="profiler",
                           clocks="SM 1980/1980 MHz, mem 2619 MHz",
                           l2_policy="flushed before each call", floor_peak="3350 GB/s (H100 SXM)")
                rows.append(row)
        rows.append(mkrow("b64-bad", "INCORRECT_NUMERICAL", axes={"batch_size": 64}))
        results = mkrun(rows)
        results.contest = {"baseline": "flashinfer_wrapper_9b7f1e", "baseline_latency_ms": {
            r.uuid: r.latency_ms * 1.3 for r in rows if r.passed}}
        rec = new_record(results, root=None, solution_name="s", solution_hash=solution * 64,
                         config={}, git=GitState(solution * 40, False, "main"))
        rec.created = f"2026-03-0{hour}T10:00:00+00:00"
        return rec

    first, second, third = run(1.2, "1", 1), run(1.0, "2", 2), run(1.01, "2", 3)
    return build_html([ReportSection(third, previous=second, history=[first, second, third])])


@pytest.fixture
def decode_page(tmp_path: Path, mkrow, mkrun, spread) -> Path:
    page = tmp_path / "decode.html"
    page.write_text(decode_html(mkrow, mkrun, spread))
    return page


MOE = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
MOE_AXES = ("seq_len", "num_active_experts_after_routing", "total_routed_token_slots")


def moe_like_html(mkrow, mkrun, spread) -> str:
    """A MoE-like GPU report, the widest kind: 78 workloads over 13 sequence lengths and three
    var axes with long names, a solution named after its definition, the baseline measured,
    a previous run, a failing workload with a long status, and a timer cross-check."""
    def run(factor: float, solution: str, hour: int):
        rows = []
        for seq in (1, 7, 14, 32, 80, 128, 512, 901, 2048, 4096, 8192, 11948, 14107):
            for k in range(6):
                ms = (0.05 + 0.0004 * seq) * factor * (1 + 0.02 * k)
                ref = (20 + 0.3 * seq) * (1 + 0.3 * k)
                axes = dict(zip(MOE_AXES, (seq, 8 + 4 * (k % 2), seq * 8), strict=True))
                rows.append(mkrow(
                    f"{seq:05d}{k}a1-2b3c-4d5e-6f70-8192a3b4c5d6", latency=ms, speedup=ref / ms,
                    reference_latency_ms=ref, axes=axes, spread=spread(ms * 0.97, ms * 1.04),
                    floor_ms=ms * 0.4, roofline_fraction=0.4, samples=150, busy_ms=ms * 0.9,
                    timing_method="cupti", clocks="SM 1980/1980 MHz, mem 2619 MHz",
                    l2_policy="flushed before each call",
                    floor_peak="989 TFLOP/s bfloat16 (H100 SXM)"))
        rows[-1] = mkrow(rows[-1].uuid, "INCORRECT_NUMERICAL", axes=rows[-1].axes)
        results = mkrun(rows, definition=MOE, solution=f"{MOE}_triton_starter_v2")
        results.contest = {"baseline": "flashinfer_wrapper_9b7f1e", "baseline_latency_ms": {
            r.uuid: r.latency_ms * 1.3 for r in rows if r.passed}}
        checked = [CrossCheckRow(r.uuid, r.axes, {"profiler": r.latency_ms, "cupti": r.latency_ms,
                                                  "events": r.latency_ms * 1.1}, {}, 3, "cupti",
                                 False, "") for r in rows[::2]]
        rec = new_record(results, root=None, solution_name="moe_triton_starter",
                         solution_hash=solution * 64, config={"cross_check": True},
                         git=GitState(solution * 40, False, "main"),
                         cross_check=[c.to_dict() for c in checked])
        rec.created = f"2026-03-0{hour}T10:00:00+00:00"
        return rec

    first, second = run(1.1, "1", 1), run(1.0, "2", 2)
    return build_html([ReportSection(second, previous=first, history=[first, second])])


@pytest.fixture
def moe_like_page(tmp_path: Path, mkrow, mkrun, spread) -> Path:
    page = tmp_path / "moe.html"
    page.write_text(moe_like_html(mkrow, mkrun, spread))
    return page


@pytest.mark.skipif(not plots.plots_available(), reason="matplotlib is not installed")
def test_a_wide_report_fits_1400_px_and_legends_fit_their_plots(moe_like_page: Path) -> None:
    with Page(moe_like_page, width=WIDTH) as page:
        fit = page.evaluate(_FIT)
        ticks = page.evaluate(_TICK_OVERLAPS)
        heads = page.evaluate("Array.from(document.querySelectorAll('table.workloads th'))"
                              ".filter(th => th.offsetParent !== null).map(th => th.textContent)")
        page.evaluate("document.querySelector('div.filters input.more').click()")
        wide = page.evaluate(_FIT)
        all_heads = page.evaluate("Array.from(document.querySelectorAll('table.workloads th'))"
                                  ".filter(th => th.offsetParent !== null).length")
        assert page.errors == [] and page.messages == []
    assert fit["scrollWidth"] <= fit["view"] == WIDTH
    assert fit["loose"] == []
    assert [b for b in fit["boxes"] if b["scroll"] > b["width"]] == []
    assert {b["table"] for b in fit["boxes"]} == {"shapes sortable", "workloads sortable"}
    assert len(fit["legends"]) >= 6  # latency (2 panels), speedup (2), roofline, overlay, ...
    for legend in fit["legends"]:
        assert legend["width"] <= legend["plotWidth"] + 1, legend
        assert legend["inFigure"] and not legend["onLabels"], legend
    assert any(f"{MOE}_triton" in lg["text"].replace(" ", "") for lg in fit["legends"])
    assert all(not fig["overlap"] for fig in ticks), ticks
    assert {*MOE_AXES, "status", "latency", "vs baseline", "max rel err"} <= set(heads)
    assert "clocks" not in heads and all_heads > len(heads)  # secondary columns on demand ...
    assert wide["scrollWidth"] <= WIDTH and wide["loose"] == []  # ... scroll in their box


def test_the_console_check_sees_a_broken_page(tmp_path: Path) -> None:
    """The detector itself: a page with a script error must be caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><p>x</p>"
        "<script>console.error('deliberate'); notDefined();</script></body></html>"
    )
    with Page(page) as opened:
        found = opened.errors
    assert any("deliberate" in m for m in found)
    assert any("notDefined" in m for m in found)


@pytest.mark.skipif(not plots.plots_available(), reason="matplotlib is not installed")
def test_plots_render_at_full_width_without_overlapping_labels(decode_page: Path) -> None:
    with Page(decode_page, width=WIDTH) as page:
        figures = page.evaluate(_TICK_OVERLAPS)
        kinds = page.evaluate(
            "Array.from(document.querySelectorAll('figure.plot')).map(f => f.dataset.plot)"
        )
        titles = page.evaluate("Array.from(document.querySelectorAll('svg text'))"
                               ".map(t => t.textContent).join('|')")
        assert page.errors == [] and page.messages == []
    assert kinds == ["latency", "speedup", "roofline", "overlay", "history"]
    for fig in figures:
        assert fig["width"] > 1000 and fig["height"] > 200, fig
        assert fig["xticks"] >= 2 and fig["yticks"] >= 2 and not fig["overlap"], fig
    for text in ("Your kernel per shape", "The Python reference (its own axis)", "roofline floor",
                 "FlashInfer baseline", "batch_size", "03-02 10:00"):
        assert text in titles


def test_workload_table_sorts_filters_and_keeps_its_header(decode_page: Path) -> None:
    with Page(decode_page, width=WIDTH, height=900) as page:
        _click(page, "latency")
        ups = _visible(page, "latency")
        _click(page, "latency")
        downs = _visible(page, "latency")
        _click(page, "batch_size")
        shapes = _visible(page, "batch_size")
        failed_count = _choose(page, "status", "failed")
        failed = _visible(page, "status")
        _choose(page, "status", "")
        shape_count = _choose(page, "shape", "batch_size=4")
        four = _visible(page, "batch_size")
        align = page.evaluate(
            "Array.from(document.querySelectorAll('table.workloads th'))"
            ".map(th => th.textContent + ':' + getComputedStyle(th).textAlign)"
        )
        _choose(page, "shape", "")
        scrolled, header_gap, first_row = page.evaluate(
            "(() => { const box = document.querySelector('table.workloads').parentElement;"
            " box.style.maxHeight = '150px'; box.scrollIntoView(); box.scrollTop = 120;"
            " const top = box.getBoundingClientRect().top;"
            " return [box.scrollTop, box.querySelector('thead th').getBoundingClientRect().top"
            " - top, box.querySelector('tbody tr').getBoundingClientRect().top - top]; })()"
        )
        assert page.errors == [] and page.messages == []
    numbers = [float(v) for v in ups if v not in ("", "-")]
    assert numbers == sorted(numbers) and len(numbers) == 12
    assert ups[-1] == "-"  # the failed workload has no latency: unknowns sort last
    assert [float(v) for v in downs[:12]] == sorted(numbers, reverse=True)
    assert shapes[0] == "1" and shapes[-1] == "64"  # numerically: 16 after 4, not before
    assert shapes.index("16") > shapes.index("4")
    assert failed == ["INCORRECT_NUMERICAL"] and failed_count == "1 of 13 workloads shown"
    assert shape_count == "3 of 13 workloads shown" and four == ["4", "4", "4"]
    assert "latency:right" in align and "status:left" in align and "% roofline:right" in align
    assert "batch_size:right" in align  # an axis is a number, over its numbers
    assert scrolled == 120 and first_row < 0  # the rows went up under the header ...
    assert abs(header_gap) <= 2  # ... which stays at the top of the scrolled table


def test_cpu_smoke_report_renders_cleanly(tmp_path: Path, mkrecord) -> None:
    cpu = mkrecord({1: 5.0, 4: 6.0, 8: 8.0}, device="cpu")
    for row in cpu.results.rows:  # as a CPU smoke run records them: the reference not timed
        row.speedup = row.reference_latency_ms = row.floor_ms = row.roofline_fraction = None
        row.timing_method, row.l2_policy = "wall-clock", "not flushed (CPU)"
        row.samples = 1  # one timed call: its p10 and p90 are that call
    page = tmp_path / "cpu.html"
    page.write_text(build_html([ReportSection(cpu)]))
    with Page(page, width=WIDTH) as opened:
        headline = opened.evaluate("document.querySelector('p.score').textContent")
        columns = opened.evaluate("Array.from(document.querySelectorAll("
                                  "'table.workloads th')).map(th => th.textContent)")
        spreads = _visible(opened, "p10-p90")
        boxes = opened.evaluate("Array.from(document.querySelectorAll('div.scroll')).map(b =>"
                                " b.getBoundingClientRect().width - b.querySelector('table')"
                                ".getBoundingClientRect().width)")
        assert opened.errors == [] and opened.messages == []
    assert headline.startswith("No score: CPU smoke run, correctness only")
    assert spreads == ["-", "-", "-"]  # no spread measured, not a spread of 0 %
    assert boxes and all(0 <= gap <= 2 for gap in boxes)  # a small table's box fits around it
    assert {"timing", "clocks", "L2", "samples", "max rel err", "roofline floor"} <= set(columns)
    png = screenshot(page, tmp_path / "cpu.png", width=WIDTH)
    width, height = _png_size(png)
    assert width == WIDTH and height > 600
