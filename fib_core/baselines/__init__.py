"""The contest's score against the FlashInfer baselines, on the GPU at hand.

The organizers rank a kernel by its speedup over a FlashInfer baseline solution of the same
definition (author "flashinfer"), not over the Python reference. This package carries:

* :mod:`.catalog` -- the five baselines, written as the kit's own solutions under the
  organizers' names, and what each needs (GPU, packages);
* :mod:`.cache` -- their latencies, kept per GPU model, library versions and timing settings;
* :mod:`.measure` -- the latencies a run needs, from the cache or measured through the engine;
* :mod:`.contest` -- a run's contest score from its traces and those latencies.

The baselines need ``pip install -e ".[baseline]"`` (flashinfer-python; the DSA indexer's also
DeepGEMM). Without them, or on a GPU their kernels do not support (MoE and DSA attention need
a B200), a run says so and still reports its speedup over the reference.
"""
