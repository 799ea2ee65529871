"""``validate`` before a submission: the categories that apply to a fork, run by
``scripts/submit.py`` before it tags.

A fork is judged on its definitions' data: their definition files and workloads in the dataset
it runs on. So ``layout``, ``definition`` and ``workload`` run for each definition of the fork
in the dataset ``$FIB_DATASET_PATH`` names (the organizers' clone, say); the embedded dataset
is the kit's own, generated and checked by its tests, and is not written out for this. The
solution itself is packed and audited by the submission's own steps, and stored traces and
baselines are not part of a submission. An error stops the submission; warnings are counted,
not shown (``python -m fib_core validate`` shows them). Nothing is written.

Example: ``ok = check_fork(Path("config.toml"))``
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fib_core.paths import dataset_env_path
from fib_core.project.config import load_config
from fib_core.validate.context import contexts
from fib_core.validate.run import validate_definition
from fib_core.validate.scan import scan

FORK_CHECKS = ("layout", "definition", "workload")


def check_fork(config_path: Path, definition: str | None = None,
               echo: Callable[[str], None] = print) -> bool:
    """Validate the fork's definitions (``definition``: only that one); echo one line per
    error and a summary; False when there is an error."""
    cfg = load_config(config_path)
    names = [definition] if definition else list(cfg.track) or [cfg.solution.definition]
    root = dataset_env_path()
    if root is None:
        echo("validate: the embedded dataset (the kit's own, checked by its tests)")
        return True
    found = contexts(scan(Path(root)))
    errors: list[str] = []
    warnings = 0
    checked = [n for n in names if n in found]  # an unknown name: the submission's steps say so
    for name in checked:
        entry = validate_definition(found[name], FORK_CHECKS)
        for _, result in entry.results():
            if result is None:
                continue
            errors += [m.message for m in result.messages if m.level == "error"]
            warnings += sum(m.level == "warning" for m in result.messages)
    for line in errors:
        echo(f"error: {root}/{line}")
    note = f", {warnings} warning(s) (python -m fib_core validate shows them)" if warnings else ""
    echo(f"validate ({', '.join(FORK_CHECKS)}) of {len(checked)} definition(s): "
         f"{len(errors)} error(s){note}")
    return not errors
