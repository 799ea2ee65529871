"""Evaluation: what runs inside a worker process and inside the judge process.

A worker (:mod:`.worker`) builds the solution, makes its inputs (:mod:`.inputs`), runs it and
times it (:mod:`.evaluator`, :mod:`.timers`); the judge, a second process that loads no
solution code, computes or loads the references (:mod:`.reference`, :mod:`.reference_sets`,
:mod:`.signed_cache`) and decides every verdict (:mod:`.judge`, :mod:`.check`). They speak
through a framing that hostile code cannot break (:mod:`.wire`, :mod:`.protocol`) and through
shared memory for large outputs (:mod:`.exchange`).

Nothing here imports the engine that launches these processes (:mod:`fib_core.bench.engine`):
the evaluation sits below it and below nothing but containment and the shared settings.
"""
