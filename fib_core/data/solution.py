"""Solution: a contestant's sources plus how to build and call them.

Everything that changes the build or the call convention feeds :meth:`Solution.hash`, which
names the build cache folder: two solutions with one hash must be interchangeable.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .fields import Bool, NonEmptyStr, RelativePath, Str, relative_path
from .model import OpenRecord
from .validation import rule_error


class SupportedLanguages(StrEnum):
    """Languages a solution may be written in."""

    PYTHON = "python"
    TRITON = "triton"
    CPP = "cpp"
    CUDA = "cuda"
    # Accepted so the organizers' newer solution files load; the kit has no builder for it.
    TILELANG = "tilelang"


class SupportedBindings(StrEnum):
    """How compiled (C++/CUDA) code is called from Python."""

    TVM_FFI = "tvm-ffi"
    TORCH = "torch"


SUPPORTED_BINDINGS: tuple[str, ...] = tuple(b.value for b in SupportedBindings)


def folder_clash(paths: list[str]) -> tuple[str, str] | None:
    """(file, other) when ``file`` is also used as a folder by ``other`` (``a`` and ``a/b.py``):
    both cannot exist on disk, so the build would fail half-way through writing the sources."""
    as_files = set(paths)
    for path in paths:
        parts = path.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder in as_files:
                return folder, path
    return None


class SourceFile(OpenRecord):
    """One file of a solution: its path inside the solution and its text."""

    POSITIONAL = ("path", "content")

    path: RelativePath
    """Relative POSIX path inside the solution (no '..', not absolute)."""
    content: Str
    """The file's text."""


class BuildSpec(OpenRecord):
    """How to build and call: language, targets, ``file::function`` entry point, conventions."""

    POSITIONAL = (
        "language", "target_hardware", "entry_point", "dependencies",
        "destination_passing_style", "binding",
    )

    language: SupportedLanguages
    """The language of the entry source (python, triton, cuda, cpp)."""
    target_hardware: list[Str] = Field(min_length=1)
    """Hardware the solution is meant for (e.g. B200)."""
    entry_point: NonEmptyStr
    """The function to call, as ``path/file.ext::function``."""
    dependencies: list[NonEmptyStr] = Field(default_factory=list)
    """Libraries the solution needs (e.g. cublas)."""
    destination_passing_style: Bool = True
    """True: outputs are preallocated and passed after the inputs; False: the function returns
    them."""
    binding: SupportedBindings = SupportedBindings.TVM_FFI
    """How compiled code is called (null in a file means the default, tvm-ffi)."""

    @field_validator("binding", mode="before")
    @classmethod
    def _default_binding(cls, value: Any) -> Any:
        return SupportedBindings.TVM_FFI if value is None else value

    @field_validator("entry_point")
    @classmethod
    def _check_entry_point(cls, value: str) -> str:
        file_part, sep, func = value.partition("::")
        if not sep or not file_part or not func.isidentifier():
            raise rule_error(
                '"path/file.ext::function"',
                hint="name the source file, two colons, then the function, e.g. main.py::run",
            )
        try:
            relative_path(file_part)
        except PydanticCustomError as err:
            raise rule_error(str(err.context["expected"]), found=value) from None
        return value

    @property
    def build_commands(self) -> list[str] | None:
        """The older files' shell build steps (None when absent). Kept as a key of the spec, so
        it is written back and hashed; the kit does not run them."""
        return self.extra.get("build_commands")

    @property
    def entry_file(self) -> str:
        return self.entry_point.partition("::")[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.partition("::")[2]



class Solution(OpenRecord):
    """A contestant's sources plus how to build and call them.

    >>> sol = Solution.model_validate({
    ...     "name": "scale_v1", "definition": "scale", "author": "me",
    ...     "spec": {"language": "triton", "target_hardware": ["B200"],
    ...              "entry_point": "main.py::run"},
    ...     "sources": [{"path": "main.py", "content": "def run(x, y): ..."}]})
    >>> sol.spec.binding, sol.model_copy(update={"name": "scale_v2"}).name
    (<SupportedBindings.TVM_FFI: 'tvm-ffi'>, 'scale_v2')
    """

    POSITIONAL = ("name", "definition", "author", "spec", "sources", "description")

    name: NonEmptyStr
    """Unique name of the solution."""
    definition: NonEmptyStr
    """Name of the definition it implements."""
    author: NonEmptyStr
    """Who wrote it (scores are per author)."""
    description: Str | None = None
    """The technique, in a sentence."""
    spec: BuildSpec
    """How to build and call it."""
    sources: list[SourceFile] = Field(min_length=1)
    """The files, with unique paths; one holds the entry point."""

    @model_validator(mode="after")
    def _check_sources(self) -> Solution:
        seen: set[str] = set()
        for i, src in enumerate(self.sources):
            if src.path in seen:
                raise rule_error("unique source paths", field=f"sources[{i}].path", found=src.path)
            seen.add(src.path)
        clash = folder_clash([src.path for src in self.sources])
        if clash is not None:
            index = next(i for i, src in enumerate(self.sources) if src.path == clash[0])
            raise rule_error(
                "a file name that no other source uses as a folder",
                field=f"sources[{index}].path",
                found=clash[0],
                hint=f"{clash[1]!r} puts a file inside it; rename one of the two",
            )
        if self.spec.entry_file not in seen:
            raise rule_error(
                f"a file listed in sources ({', '.join(sorted(seen))})",
                field="spec.entry_point",
                found=self.spec.entry_point,
            )
        return self

    def get_source(self, path: str) -> SourceFile | None:
        for src in self.sources:
            if src.path == path:
                return src
        return None

    # --- the organizers' spellings --------------------------------------------------------------

    def get_entry_source(self) -> SourceFile | None:
        """The source file holding the entry point (``spec.entry_file``), None if absent."""
        return self.get_source(self.spec.entry_file)

    def requires_build(self) -> bool:
        """True for compiled languages (cuda, cpp); Python and Triton sources are imported."""
        return str(getattr(self.spec.language, "value", self.spec.language)) in ("cuda", "cpp")

    def get_entry_path(self) -> Path:
        """The entry source's path (the part of ``spec.entry_point`` before ``::``)."""
        return Path(self.spec.entry_file)

    def get_entry_symbol(self) -> str:
        """The entry function's name (the part of ``spec.entry_point`` after ``::``)."""
        return self.spec.entry_function

    def to_json(self) -> str:
        """The solution as indented JSON text (the file format)."""
        return self.to_json_text(indent=2)

    def hash(self) -> str:
        """sha256 hex of the canonical JSON of what the build and the call depend on.

        Canonical = sorted keys, no whitespace, ASCII escapes, sources sorted by path, defaulted
        spec keys written out: the same solution hashes the same in any process or Python.
        The name, author and description are left out: renaming does not change the binary.
        """
        payload = {
            "definition": self.definition,
            "spec": self.spec.model_dump(mode="json"),
            "sources": sorted([src.path, src.content] for src in self.sources),
        }
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
