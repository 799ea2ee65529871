"""Bounded views of what a solution printed: head and tail kept, the size noted.

A solution may print a 100 MB line or gigabytes of text; none of it may end up whole in a trace
(every report and renderer would then pay for it). Log files are read by seeking, never whole,
and any text going into a trace passes through :func:`clip_text`.
"""

from __future__ import annotations

from pathlib import Path

HEAD_BYTES = 4 << 10
TAIL_BYTES = 16 << 10
MAX_LINE_CHARS = 2000
MAX_LOG_CHARS = 32 << 10


def clip_line(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """One line cut to ``limit`` characters, saying how much was dropped."""
    if len(line) <= limit:
        return line
    keep = limit // 2
    return f"{line[:keep]} [... {len(line) - 2 * keep} characters omitted ...] {line[-keep:]}"


def clip_text(text: str, limit: int = MAX_LOG_CHARS) -> str:
    """Text with every line clipped and, past ``limit`` characters, only its head and tail."""
    if not isinstance(text, str):
        text = str(text)
    lines = [clip_line(line) for line in text.splitlines()]
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 4], text[-(3 * limit) // 4 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters omitted ...]\n{tail}"


def read_bounded(path: Path, offset: int = 0, *, lines: int = 30) -> str:
    """The last ``lines`` lines written to ``path`` after ``offset`` (plus its first bytes when
    the segment is large), each line clipped, the number of bytes skipped noted."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            end = fh.tell()
            size = max(0, end - offset)
            if size <= HEAD_BYTES + TAIL_BYTES:
                fh.seek(offset)
                data = fh.read(size)
                head = b""
            else:
                fh.seek(offset)
                head = fh.read(HEAD_BYTES)
                fh.seek(end - TAIL_BYTES)
                data = fh.read(TAIL_BYTES)
    except OSError:
        return ""
    tail_lines = [clip_line(x) for x in data.decode("utf-8", "replace").rstrip().splitlines()]
    tail_text = "\n".join(tail_lines[-lines:])
    if not head:
        return tail_text
    head_lines = [clip_line(x) for x in head.decode("utf-8", "replace").splitlines()[:5]]
    skipped = size - len(head) - len(data)
    return (
        "\n".join(head_lines) + f"\n[... output of {size} bytes; {skipped} bytes omitted "
        "...]\n" + tail_text
    )
