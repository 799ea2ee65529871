"""The embedded default dataset: contest definitions, our references, workloads, roofline models.

``default_dataset_path()`` is where the kit reads a dataset from: ``$FIB_DATASET_PATH`` when set,
else the embedded one, materialised on first use by ``embedded_dataset_path()``. Importing this
package is cheap (no torch); torch is needed only to write the blobs the first time.
"""

from __future__ import annotations

from fib_core.dataset.embedded import default_dataset_path, embedded_dataset_path

__all__ = ["default_dataset_path", "embedded_dataset_path"]
