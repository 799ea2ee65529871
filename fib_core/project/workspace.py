"""A fork's working state: its config, the dataset it runs against, and its definition.

Scripts start here so that every one of them resolves the dataset and reports a wrong
definition name the same way.

Example::

    from fib_core.project.workspace import open_workspace
    ws = open_workspace("config.toml")
    solution = ws.pack()
    print(ws.dataset_path, ws.definition.name, solution.hash())
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fib_core.data import TraceSet
from fib_core.data.errors import DatasetNotFoundError
from fib_core.dataset import default_dataset_path
from fib_core.dataset.checks import name_dataset_variable
from fib_core.project.config import KitConfig, check_definition_exists, load_config
from fib_core.project.pack import pack_solution
from fib_core.project.track import definition_config

if TYPE_CHECKING:
    from fib_core.data import Definition, Solution, TraceSet


@dataclass
class Workspace:
    cfg: KitConfig
    dataset_path: Path
    embedded: bool
    trace_set: TraceSet

    @property
    def definition(self) -> Definition:
        return self.trace_set.definitions[self.cfg.solution.definition]

    def pack(self) -> Solution:
        """The Solution from ``solution/<language>/``, checked against the definition."""
        return pack_solution(self.cfg, self.definition)


def resolve_dataset() -> tuple[Path, bool]:
    """``$FIB_DATASET_PATH`` if set, else the embedded default dataset (materialised once)."""
    return default_dataset_path(), not os.environ.get("FIB_DATASET_PATH")


def open_workspace(
    config_path: str | Path = "config.toml", definition: str | None = None
) -> Workspace:
    """Load config and dataset, and check that the config's definition is in the dataset.

    ``definition``: one definition of a fork holding a whole track (``[track]`` in
    config.toml, see :mod:`fib_core.project.track`); None is the default one."""
    cfg = definition_config(config_path, definition) if definition else load_config(config_path)
    path, embedded = resolve_dataset()
    try:
        trace_set = TraceSet.from_path(path)
    except DatasetNotFoundError as err:
        raise name_dataset_variable(err) from None
    check_definition_exists(cfg, trace_set.definitions, str(path))
    return Workspace(cfg=cfg, dataset_path=path, embedded=embedded, trace_set=trace_set)
