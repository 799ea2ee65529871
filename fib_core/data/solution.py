"""Solution: a contestant's sources plus how to build and call them.

Everything that changes the build or the call convention feeds :meth:`Solution.hash`, which
names the build cache folder: two solutions with one hash must be interchangeable.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fib_core.errors import SchemaError

from . import _schema as s


class SupportedLanguages(StrEnum):
    PYTHON = "python"
    TRITON = "triton"
    CUDA = "cuda"
    CPP = "cpp"
    # Accepted so the organizers' newer solution files load; the kit has no builder for it.
    TILELANG = "tilelang"


SUPPORTED_BINDINGS: tuple[str, ...] = ("tvm-ffi", "torch")


def check_relative_path(path: Any, field_name: str) -> str:
    """A safe relative POSIX path: no absolute paths, no ``..``, no empty parts, no backslashes.

    Sources are written under a build folder; a path that escapes it would overwrite other files.
    """
    s.check_str(path, field_name)
    bad = (
        path.startswith("/")
        or "\\" in path
        or "\0" in path
        or (len(path) > 1 and path[1] == ":")
        or any(part in ("", "..") for part in path.split("/"))
    )
    if bad:
        raise SchemaError(
            "a relative path inside the solution (no leading '/', no '..', no empty parts, "
            "no NUL byte)",
            field=field_name,
            found=path,
        )
    long_part = next(
        (
            p
            for p in path.split("/")
            if len(p.encode("utf-8", "surrogatepass")) > MAX_PATH_PART_BYTES
        ),
        None,
    )
    if long_part is not None:
        raise SchemaError(
            f"file and folder names of at most {MAX_PATH_PART_BYTES} bytes",
            field=field_name,
            found=path,
            hint=f"shorten {long_part[:20]}...",
        )
    return path


# The longest file name common file systems take.
MAX_PATH_PART_BYTES = 255


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


@dataclass
class SourceFile:
    path: str
    content: str

    def __post_init__(self) -> None:
        self.path = check_relative_path(self.path, "path")
        s.check_str(self.content, "content", non_empty=False)

    @classmethod
    def from_dict(cls, d: dict) -> SourceFile:
        s.as_object(d, "")
        return cls(path=s.require(d, "path", ""), content=s.require(d, "content", ""))

    def to_dict(self) -> dict:
        return {"path": self.path, "content": self.content}


@dataclass
class BuildSpec(s.Record):
    """How to build and call: language, targets, ``file::function`` entry point, conventions."""

    PARSE = {"binding": lambda raw: "tvm-ffi" if raw is None else raw}  # null: the default

    language: SupportedLanguages | str
    target_hardware: list[str]
    entry_point: str
    dependencies: list[str] = field(default_factory=list)
    destination_passing_style: bool = True
    binding: str = "tvm-ffi"
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            self.language = SupportedLanguages(self.language)
        except ValueError:
            raise SchemaError(
                "one of " + ", ".join(lang.value for lang in SupportedLanguages),
                field="language",
                found=self.language,
            ) from None
        s.check_str_list(self.target_hardware, "target_hardware")
        s.check_str_list(self.dependencies, "dependencies")
        s.check_bool(self.destination_passing_style, "destination_passing_style")
        if self.binding not in SUPPORTED_BINDINGS:
            raise SchemaError(
                " or ".join(repr(b) for b in SUPPORTED_BINDINGS),
                field="binding",
                found=self.binding,
            )
        s.check_str(self.entry_point, "entry_point")
        file_part, sep, func = self.entry_point.partition("::")
        if not sep or not file_part or not func.isidentifier():
            raise SchemaError(
                '"path/file.ext::function"',
                field="entry_point",
                found=self.entry_point,
                hint="name the source file, two colons, then the function, e.g. main.py::run",
            )
        check_relative_path(file_part, "entry_point")

    @property
    def entry_file(self) -> str:
        return self.entry_point.partition("::")[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.partition("::")[2]

    def to_dict(self, *, explicit: bool = False) -> dict:
        """The JSON form; ``explicit`` writes defaulted keys too (used by the hash)."""
        keys = self._keys
        out: dict[str, Any] = {
            "language": SupportedLanguages(self.language).value,
            "target_hardware": list(self.target_hardware),
            "entry_point": self.entry_point,
        }
        optional = (
            ("dependencies", list(self.dependencies), []),
            ("destination_passing_style", self.destination_passing_style, True),
            ("binding", self.binding, "tvm-ffi"),
        )
        for key, value, default in optional:
            if explicit:
                out[key] = value
            else:
                s.put_optional(out, keys, key, value, default)
        return s.with_unknown(out, self.extra, keys)


def _sources_from_list(raw: Any) -> list[SourceFile]:
    if not isinstance(raw, list):
        raise SchemaError("a list of {path, content} objects", field="sources", found=raw)
    return [
        s.parse_under(f"sources[{i}]", SourceFile.from_dict, item) for i, item in enumerate(raw)
    ]


@dataclass
class Solution(s.Record):
    PARSE = {
        "spec": lambda raw: s.parse_under("spec", BuildSpec.from_dict, raw),
        "sources": _sources_from_list,
    }

    name: str
    definition: str
    author: str
    spec: BuildSpec
    sources: list[SourceFile]
    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        s.check_str(self.name, "name")
        s.check_str(self.definition, "definition")
        s.check_str(self.author, "author")
        s.check_opt_str(self.description, "description")
        if not isinstance(self.spec, BuildSpec):
            raise SchemaError("a BuildSpec", field="spec", found=self.spec)
        if not isinstance(self.sources, list) or not self.sources:
            raise SchemaError(
                "a non-empty list of source files", field="sources", found=self.sources
            )
        seen: set[str] = set()
        for i, src in enumerate(self.sources):
            if not isinstance(src, SourceFile):
                raise SchemaError("a SourceFile", field=f"sources[{i}]", found=src)
            if src.path in seen:
                raise SchemaError("unique source paths", field=f"sources[{i}].path", found=src.path)
            seen.add(src.path)
        clash = folder_clash([src.path for src in self.sources])
        if clash is not None:
            index = next(i for i, src in enumerate(self.sources) if src.path == clash[0])
            raise SchemaError(
                "a file name that no other source uses as a folder",
                field=f"sources[{index}].path",
                found=clash[0],
                hint=f"{clash[1]!r} puts a file inside it; rename one of the two",
            )
        if self.spec.entry_file not in seen:
            raise SchemaError(
                f"a file listed in sources ({', '.join(sorted(seen))})",
                field="spec.entry_point",
                found=self.spec.entry_point,
            )

    def to_dict(self) -> dict:
        keys = self._keys
        out: dict[str, Any] = {
            "name": self.name,
            "definition": self.definition,
            "author": self.author,
        }
        s.put_optional(out, keys, "description", self.description)
        out["spec"] = self.spec.to_dict()
        out["sources"] = [src.to_dict() for src in self.sources]
        return s.with_unknown(out, self.extra, keys)

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

    def to_json(self) -> str:
        """The solution as indented JSON text (the file format)."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def hash(self) -> str:
        """sha256 hex of the canonical JSON of what the build and the call depend on.

        Canonical = sorted keys, no whitespace, ASCII escapes, sources sorted by path, defaulted
        spec keys written out: the same solution hashes the same in any process or Python.
        The name, author and description are left out: renaming does not change the binary.
        """
        payload = {
            "definition": self.definition,
            "spec": self.spec.to_dict(explicit=True),
            "sources": sorted([src.path, src.content] for src in self.sources),
        }
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
