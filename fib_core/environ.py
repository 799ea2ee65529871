"""Environment variables set for a while, then put back as they were.

The CUDA builders set the target arch this way for one build (their back ends read it from the
environment only), and a launcher names one GPU in ``CUDA_VISIBLE_DEVICES`` while it starts
the processes of a measurement. Neither takes a lock here: a caller whose threads could race
holds its own (the builders do).

Example::

    with scoped_environ({"CUDA_VISIBLE_DEVICES": "1"}):
        start_processes()   # they see GPU 1 only; the variable is restored afterwards
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def scoped_environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` while inside; each variable gets back its earlier
    value afterwards, or is removed when it had none."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
