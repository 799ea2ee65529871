"""``python -m fib_core serve``: an HTTP evaluation service over a dataset, for agents that
write kernels in a loop (the organizers' endpoints; docs/serve.md, whose plain-HTTP client is
tested as written).

Each submitted solution becomes a task; tasks are spread over the server's devices, one
evaluation process per device, each running the same flow as ``run_local.py`` (sandboxed
workers, the judge, the same settings and timers). Needs the extra: ``pip install -e
".[serve]"``. Importing this package imports neither FastAPI nor torch.

Modules: :mod:`.cli` (flags, start), :mod:`.app` (routes), :mod:`.guard` (token, body cap),
:mod:`.service` (submissions, requests, stored traces), :mod:`.scheduler` (devices and their
queue), :mod:`.lane_process` (one device's evaluation process), :mod:`.tasks` (task states).

Example (a shell)::

    python -m fib_core serve --local my-dataset --devices cuda:0,cuda:1
    curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8000/definitions
"""
