"""Errors a contestant can act on.

Every exception the kit raises for a *user* mistake (bad config, bad JSON, missing file, LFS
pointer, wrong signature, failed build) derives from :class:`FibError`. Entry points (scripts,
CLI) catch ``FibError`` and print ``str(err)`` as one line, with no traceback. Anything else is a
bug in the kit and keeps its traceback.

Messages follow one shape: *where* (file, line, field), *what was found*, *what was expected*,
and, when there is one, *what to do*.
"""

from __future__ import annotations

from pathlib import Path


class FibError(Exception):
    """Base class of user-facing errors: ``str(err)`` is a complete, single-line message."""


class FibWarning(UserWarning):
    """Base class of the kit's warnings: the message is complete on one line (the scripts
    print it as ``warning: <message>``)."""


class SchemaError(FibError, ValueError):
    """A file or object does not follow the FlashInfer-Trace schema.

    >>> str(SchemaError("a list", file="defs/a.json", field="inputs.q.shape", found=3))
    'defs/a.json: inputs.q.shape: found 3, expected a list'
    """

    def __init__(
        self,
        expected: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        found: object = None,
        hint: str | None = None,
    ) -> None:
        self.expected = expected
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        self.found = found
        self.hint = hint
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line is not None else "") + ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        if self.field:
            where += f"{self.field}: "
        what = self.expected
        if self.found is not None:
            what = f"found {_short(self.found)}, expected {self.expected}"
        return where + what + (f" ({self.hint})" if self.hint else "")

    def located(self, file: str | Path | None = None, line: int | None = None) -> SchemaError:
        """Return a copy that also names the file and line (added by the loader, which knows them)."""
        return SchemaError(
            self.expected,
            file=file if file is not None else self.file,
            line=line if line is not None else self.line,
            field=self.field,
            found=self.found,
            hint=self.hint,
        )


class LfsPointerError(FibError):
    """A git-LFS pointer file sits where a real blob should be."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        super().__init__(
            f"{self.path}: is a git-LFS pointer, not the data; run `git lfs pull` in the "
            "dataset folder (install git-lfs first: `git lfs install`)"
        )


class ConfigError(FibError):
    """config.toml (or a CLI flag) holds a value the kit cannot use."""


class BuildError(FibError, RuntimeError):
    """A solution could not be built; the message carries the compiler's own error lines.

    Also a ``RuntimeError``, as the organizers' ``compile.BuildError`` is.
    """


class SignatureError(FibError):
    """The solution's entry function does not take the arguments the definition passes."""


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"


def is_lfs_pointer(path: str | Path) -> bool:
    """True when ``path`` is a small text file that git-LFS left instead of the real content."""
    p = Path(path)
    try:
        if p.stat().st_size > 1024:
            return False
        with p.open("rb") as fh:
            return fh.read(len(LFS_POINTER_PREFIX)) == LFS_POINTER_PREFIX
    except OSError:
        return False
