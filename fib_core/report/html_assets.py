"""The report page's style sheet and its one inline script, and the small markup helpers.

The script is what makes the per-workload table usable at 54+ rows: a click (or Enter) on a
header sorts by that column (numbers by value, unknown values last; again to reverse), two
drop-downs filter the rows by status and by shape, and a check box shows the secondary
columns (the measurement's conditions, the raw latencies behind each ratio), which are hidden
at first so that the table fits a 1400 px window. It is inline, fetches nothing, and the page
forbids fetching anything (a Content-Security-Policy of no sources but inline ones), so the
report stays one file that works offline.

Example::

    head = [Column("latency", title="the kernel's latency"), Column("status", numeric=False)]
    row = "<tr>" + td("7.21 us", v=0.00721) + td("PASSED", left=True) + "</tr>"
    page_part = table(head, [row], cls="workloads sortable")
"""

from __future__ import annotations

import html
from typing import NamedTuple

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; font-src 'none'; connect-src 'none'"
)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2328;
max-width:1340px}
h1{font-size:22px}h2{font-size:19px;border-bottom:1px solid #d0d7de;padding-bottom:4px;
margin-top:36px}h3{font-size:15px;margin-top:22px}
table{border-collapse:separate;border-spacing:0;font-size:13px;margin:6px 0}
th,td{border-right:1px solid #d0d7de;border-bottom:1px solid #d0d7de;padding:3px 8px;
text-align:right;vertical-align:top;white-space:nowrap}
thead th{white-space:normal;vertical-align:bottom}
tr>:first-child{border-left:1px solid #d0d7de}thead th{border-top:1px solid #d0d7de}
td.wrap{white-space:normal}
th{background:#f6f8fa}td.l,th.l{text-align:left}
.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}
.faster{color:#1a7f37}.slower{color:#cf222e}.note{color:#57606a;font-size:13px}
.banner{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;margin:8px 0}
.score{font-size:18px;font-weight:600;margin-bottom:4px}ul.details{margin-top:2px;color:#424a53;
font-size:14px}pre{background:#f6f8fa;padding:6px;font-size:12px;overflow-x:auto;
text-align:left}svg{width:100%;height:auto;display:block}
.scroll{max-height:75vh;overflow:auto;border:1px solid #d0d7de;margin:6px 0;width:fit-content;
max-width:100%}
.scroll table{margin:0}
table.sortable thead th{position:sticky;top:0;z-index:1;cursor:pointer;user-select:none}
table.sortable thead th[aria-sort=ascending]::after{content:" \\25B2";font-size:10px}
table.sortable thead th[aria-sort=descending]::after{content:" \\25BC";font-size:10px}
.filters{font-size:13px;margin:8px 0}.filters label{margin-right:14px}
table.workloads:not(.all-columns) .more{display:none}
table.workloads.all-columns td.wrap{white-space:nowrap}
"""

# Sorting and filtering of every table.sortable / div.filters on the page.
SCRIPT = """
(function () {
  "use strict";
  function sortKey(cell, numeric) {
    var v = cell.getAttribute("data-v");
    if (numeric) { return v === null || v === "" ? null : parseFloat(v); }
    return (v !== null ? v : cell.textContent).toLowerCase();
  }
  function sortBy(table, index, th) {
    var numeric = th.classList.contains("num");
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) {
      other.removeAttribute("aria-sort");
    });
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = sortKey(a.cells[index], numeric), y = sortKey(b.cells[index], numeric);
      if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
      return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
    });
    rows.forEach(function (row) { body.appendChild(row); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      th.tabIndex = 0;
      th.title = (th.title ? th.title + "; click to " : "") + "sort by " + th.textContent;
      th.addEventListener("click", function () { sortBy(table, index, th); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, index, th); }
      });
    });
  });
  document.querySelectorAll("div.filters").forEach(function (box) {
    var table = document.getElementById(box.getAttribute("data-for"));
    var status = box.querySelector("select.status"), shape = box.querySelector("select.shape");
    var count = box.querySelector(".shown"), more = box.querySelector("input.more");
    function apply() {
      var rows = table.tBodies[0].rows, shown = 0;
      Array.prototype.forEach.call(rows, function (row) {
        var s = row.getAttribute("data-status");
        var okStatus = status.value === "" || s === status.value ||
          (status.value === "failed" && s !== "PASSED");
        var ok = okStatus && (shape.value === "" || row.getAttribute("data-shape") === shape.value);
        row.hidden = !ok;
        if (ok) { shown += 1; }
      });
      count.textContent = shown + " of " + rows.length + " workloads shown";
    }
    status.addEventListener("change", apply);
    shape.addEventListener("change", apply);
    if (more) {
      more.addEventListener("change", function () {
        table.classList.toggle("all-columns", more.checked);
      });
    }
    apply();
  });
})();
"""


class Column(NamedTuple):
    """One column's header: its name, whether it holds numbers (they sit right, and sort by
    value), the tooltip that says what it is, and whether it is secondary (``more``: hidden
    until the table's "all columns" box is ticked)."""

    name: str
    numeric: bool = True
    title: str = ""
    more: bool = False


def e(text: object) -> str:
    """HTML-escaped text (quotes too: safe inside an attribute)."""
    return html.escape(str(text), quote=True)


def breakable(text: object) -> str:
    """Escaped text that may break after each underscore (``num_<wbr>tokens``): an axis name or
    a status is one long word that would otherwise set its column's width."""
    return e(text).replace("_", "_<wbr>")


def td(
    text: str,
    *,
    v: float | str | None = None,
    left: bool = False,
    title: str | None = None,
    wrap: bool = False,
    cls: str = "",
    more: bool = False,
) -> str:
    """One cell; ``v`` is the value the table sorts it by (a number for numeric columns);
    ``wrap`` lets its text wrap (at spaces and underscores); ``more`` marks a secondary
    column's cell (see :class:`Column`)."""
    flags = (("l", left), ("wrap", wrap), ("more", more), (cls, bool(cls)))
    classes = " ".join(c for c, on in flags if on)
    attrs = f' class="{classes}"' if classes else ""
    if v is not None:
        attrs += f' data-v="{e(repr(v) if isinstance(v, float) else v)}"'
    if title:
        attrs += f' title="{e(title)}"'
    return f"<td{attrs}>{breakable(text) if wrap else e(text)}</td>"


def table(
    head: list[Column] | list[tuple[str, bool]],
    rows: list[str],
    *,
    cls: str,
    table_id: str | None = None,
) -> str:
    """A table; ``head`` holds a :class:`Column` (or a (name, numeric) pair) per column:
    numeric headers sit right, over their numbers; a long name may wrap at its underscores."""
    th = ""
    for col in (Column(*c) for c in head):
        classes = ("num" if col.numeric else "l") + (" more" if col.more else "")
        tip = f' title="{e(col.title)}"' if col.title else ""
        th += f'<th class="{classes}"{tip}>{breakable(col.name)}</th>'
    ident = f' id="{e(table_id)}"' if table_id else ""
    return (
        f'<table class="{cls}"{ident}><thead><tr>{th}</tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table>'
    )
