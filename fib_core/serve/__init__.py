"""``python -m fib_core serve``: an HTTP evaluation service over a dataset, for agents that
write kernels in a loop (the organizers' endpoints; docs/serve.md).

Each submitted solution becomes a task; tasks are spread over the server's devices, one
evaluation process per device, each running the same flow as ``run_local.py`` (sandboxed
workers, the judge, the same settings and timers). Needs the extra: ``pip install -e
".[serve]"``. Importing this package imports neither FastAPI nor torch.

Client example (plain HTTP, standard library only)::

    import json, urllib.request
    def call(path, body=None, token="TOKEN-PRINTED-AT-START"):
        req = urllib.request.Request(f"http://127.0.0.1:8000{path}", method="POST" if body else "GET",
                                     data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(req))
    task = call("/evaluate", {"solution": json.load(open("solution.json"))})
    print(call(f"/tasks/{task['task_id']}?timeout=600")["traces"])
"""
