"""Submission tags: one ``submission-<definition>-vN`` tag per definition, made with git.

The organizers check out each tag and read its ``config.toml``, which must name that tag's
definition in their format, with the sources in ``solution/<language>/``. A single-kernel fork
already looks like that, so its tag goes on ``HEAD``. A track fork (:mod:`fib_core.project.track`)
does not: for each definition a commit is written whose tree is ``HEAD``'s except that
``config.toml`` is the single-definition form and ``solution/`` holds only that definition's
``<language>/`` folder. The commit is built with git's plumbing (a temporary index file,
``write-tree``, ``commit-tree``), its parent is ``HEAD``, and the tag keeps it reachable: the
branch, the index and the working tree are never touched.

Example::

    from fib_core.project.tagging import next_tag, submission_commit, create_tag
    name = next_tag(root, cfg.solution.definition)       # submission-<definition>-v3
    create_tag(root, name, submission_commit(root, cfg), "checked on B200")
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from fib_core.errors import ConfigError
from fib_core.gitcmd import GitError, git
from fib_core.project.track import single_definition_text

if TYPE_CHECKING:
    from fib_core.project.config import KitConfig

TAG_PREFIX = "submission-"


def uncommitted(root: Path) -> list[str]:
    """Paths with uncommitted changes or untracked, non-ignored files (``git status``).

    Read in git's version-2 porcelain form, NUL-separated: each entry starts with its type
    letter (never with a space that :func:`~fib_core.gitcmd.git`'s stripped output would eat,
    as the first entry's ``" M config.toml"`` of the version-1 form was), and paths come
    unquoted."""
    text = git(root, "status", "--porcelain=v2", "-z", "--untracked-files=all")
    fields = {"1": 8, "2": 9, "u": 10}  # spaces before the path, per entry type
    paths: list[str] = []
    entries = iter(text.split("\0"))
    for entry in entries:
        kind = entry[:1]
        if kind in ("?", "!"):
            paths.append(entry[2:])
        elif kind in fields:
            paths.append(entry.split(" ", fields[kind])[-1])
            if kind == "2":
                next(entries, None)  # a rename's original path follows as its own entry
    return [p for p in paths if p]


def repo_root(path: Path) -> Path:
    """The top of the git work tree holding ``path``; ConfigError outside git."""
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except GitError:
        raise ConfigError(
            f"{path}: not inside a git repository; submissions are git tags "
            "(git init, commit your fork, then run this again)"
        ) from None


def tag_name(definition: str, version: int) -> str:
    """``submission-<definition>-v<version>``."""
    return f"{TAG_PREFIX}{definition}-v{version}"


def next_tag(root: Path, definition: str) -> str:
    """The next free ``submission-<definition>-vN`` (N = 1 + the highest existing)."""
    pattern = re.compile(rf"^{re.escape(TAG_PREFIX + definition)}-v(\d+)$")
    names = git(root, "tag", "--list", f"{TAG_PREFIX}{definition}-v*").splitlines()
    numbers = [int(m.group(1)) for n in names if (m := pattern.match(n.strip()))]
    return tag_name(definition, max(numbers, default=0) + 1)


def submission_commit(root: Path, cfg: KitConfig, message: str | None = None) -> str:
    """The commit to tag for ``cfg``'s definition: ``HEAD`` for a single-kernel fork, else a
    new commit (parent ``HEAD``) holding the single-definition layout. Returns its hash."""
    head = git(root, "rev-parse", "HEAD")
    if not cfg.track:
        return head

    definition, language = cfg.solution.definition, cfg.build.language
    source = f"solution/{definition}/{language}"
    try:
        git(root, "rev-parse", "--verify", "--quiet", f"HEAD:{source}")
    except GitError:
        raise ConfigError(
            f"{source}/ is not in the last commit; commit it before tagging"
        ) from None
    config_blob = git(root, "hash-object", "-w", "--stdin", data=single_definition_text(cfg))
    with tempfile.TemporaryDirectory(prefix="fib-tag-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(root, "read-tree", "HEAD", env=env)
        git(root, "rm", "-r", "--cached", "--quiet", "--ignore-unmatch", "solution", env=env)
        git(root, "read-tree", f"--prefix=solution/{language}/", f"HEAD:{source}", env=env)
        git(
            root,
            "update-index",
            "--add",
            "--cacheinfo",
            f"100644,{config_blob},config.toml",
            env=env,
        )
        tree = git(root, "write-tree", env=env)
    text = message or f"Submission of {definition} (single-definition layout of {head[:12]})"
    return git(root, "commit-tree", tree, "-p", head, "-m", text)


def create_tag(root: Path, name: str, commit: str, message: str) -> None:
    """An annotated tag ``name`` on ``commit``; refuses to move an existing tag."""
    try:
        git(root, "rev-parse", "--verify", "--quiet", f"refs/tags/{name}")
    except GitError:
        git(root, "tag", "-a", name, commit, "-m", message)
        return
    raise ConfigError(f"tag {name} already exists; tags are never moved (a new vN is made)")


def push_command(root: Path, tags: list[str]) -> str:
    """The command that publishes ``tags`` (first remote, else ``origin``)."""
    remotes = git(root, "remote").split()
    remote = remotes[0] if remotes else "origin"
    return f"git push {remote} " + " ".join(tags)
