"""fib_core: a small, vendorable benchmark core for FlashInfer-Trace kernel contests.

Read ``docs/design.md`` for the map of packages. The most used names are re-exported here
lazily, so ``import fib_core`` stays cheap (no torch import) for scripts that only read data.
"""

from __future__ import annotations

__version__ = "0.1.0"
