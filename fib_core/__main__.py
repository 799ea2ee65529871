"""Entry point of ``python -m fib_core``; see :mod:`fib_core.cli`."""

from fib_core.cli import main

raise SystemExit(main())
