"""The engine: the launching process of a benchmark run.

It takes the run's pairs (solution, workload) in order (:mod:`.flow`), starts and replaces the
worker and judge processes that evaluate them (:mod:`.pool`), hands each one task at a time
and turns what comes back into trace records (:mod:`.traces`), saved as they arrive
(:mod:`.trace_sink`) under a lock that keeps two ``--resume`` runs of the same pair apart
(:mod:`.run_lock`). Progress goes to the caller's ``on_event`` (:mod:`fib_core.bench.events`).

It imports the evaluation (the messages it exchanges with its processes) and containment (the
sandbox plan it gives them); neither imports it back.
"""
