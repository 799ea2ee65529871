"""``fib_core.cli``: the command line's public names, in the organizers' layout.

``python -m fib_core`` runs :func:`main`, the kit's commands (:mod:`fib_core.commands`);
:func:`cli` is the console entry point under the organizers' name. Code written for the
organizers' package imports their command functions from a ``cli.main`` module
(``from fib_core.cli.main import run, summary``): that import finds
:mod:`fib_core.cli_compat`, registered under the name here, while ``fib_core.cli.main``
stays the kit's ``main`` function.

Example::

    from fib_core.cli import main
    main(["report", "summary", "--local", "path/to/dataset"])
"""

from __future__ import annotations

import sys

from fib_core import cli_compat
from fib_core.commands import cli, main

__all__ = ["cli", "main"]

sys.modules.setdefault(f"{__name__}.main", cli_compat)
