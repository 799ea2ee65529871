"""The HTTP routes of ``python -m fib_core serve`` (FastAPI), with the organizers' paths,
request and response shapes and task states; see docs/serve.md for each one.

``create_app(service, scheduler, token=..., max_body=..., on_shutdown=...)`` returns the ASGI
app, already behind :class:`fib_core.serve.guard.Guard` (token, body cap).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from fib_core.serve.guard import Guard
from fib_core.serve.scheduler import QueueFull, Scheduler
from fib_core.serve.service import Rejected, Service
from fib_core.serve.tasks import StoreFull

MAX_WAIT_S = 3600.0
MAX_BATCH = 1000
POLL_S = 0.1


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    solution: dict[str, Any]
    workload_uuids: list[str] | None = Field(default=None, max_length=100_000)


class EvaluateResponse(BaseModel):
    task_id: str
    normalized_solution_name: str


class TaskResponse(BaseModel):
    task_id: str
    status: str
    definition: str
    solution: str
    traces: list[dict[str, Any]] | None = None
    error: str | None = None


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_ids: list[str] = Field(max_length=MAX_BATCH)
    timeout: float = Field(default=0.0, le=MAX_WAIT_S)


class DefinitionInfo(BaseModel):
    name: str
    description: str | None = None


class WorkerInfo(BaseModel):
    device: str
    healthy: bool


class HealthResponse(BaseModel):
    status: str
    workers: list[WorkerInfo]
    queue_size: int


ENDPOINTS = [
    ("GET", "/definitions", "the dataset's definitions"),
    ("GET", "/definitions/{name}", "one definition"),
    ("GET", "/definitions/{name}/workloads", "a definition's workloads"),
    ("GET", "/workloads/{uuid}", "one workload"),
    ("POST", "/evaluate", "submit a solution: a task"),
    ("GET", "/tasks/{task_id}", "a task (?timeout= waits for it)"),
    ("POST", "/tasks/batch", "several tasks"),
    ("GET", "/health", "the devices and the queue"),
    ("POST", "/shutdown", "stop the server"),
]


def create_app(service: Service, scheduler: Scheduler, *, token: str | None, max_body: int,
               on_shutdown: Callable[[], None]) -> Any:
    """The routes of :data:`ENDPOINTS` over ``service`` and ``scheduler``, behind the guard."""
    app = FastAPI(title="fib_core serve")

    @app.exception_handler(Rejected)
    async def rejected(_: Any, err: Rejected) -> JSONResponse:
        return JSONResponse({"detail": err.detail}, status_code=err.status)

    @app.get("/")
    async def root() -> dict[str, Any]:
        return {"name": "fib_core serve", "endpoints": [
            {"method": m, "path": p, "description": d} for m, p, d in ENDPOINTS]}

    _add_dataset_routes(app, service)
    _add_task_routes(app, service, scheduler)
    _add_server_routes(app, scheduler, on_shutdown)
    return Guard(app, token, max_body)


def _add_dataset_routes(app: FastAPI, service: Service) -> None:
    """What the dataset holds: definitions and workloads, read only."""

    @app.get("/definitions", response_model=list[DefinitionInfo])
    async def definitions() -> list[DefinitionInfo]:
        return [DefinitionInfo(name=n, description=d.description)
                for n, d in service.trace_set.definitions.items()]

    @app.get("/definitions/{name}")
    async def definition(name: str) -> dict[str, Any]:
        found = service.definition(name)
        if found is None:
            raise HTTPException(404, f"definition not found: {name}")
        return found.to_dict()

    @app.get("/definitions/{name}/workloads")
    async def workloads(name: str) -> list[dict[str, Any]]:
        if service.definition(name) is None:
            raise HTTPException(404, f"definition not found: {name}")
        return [w.to_dict() for w in service.workloads(name)]

    @app.get("/workloads/{uuid}")
    async def workload(uuid: str) -> dict[str, Any]:
        found = service.workload(uuid)
        if found is None:
            raise HTTPException(404, f"workload not found: {uuid}")
        return found.to_dict()


def _add_task_routes(app: FastAPI, service: Service, scheduler: Scheduler) -> None:
    """Submitting a solution (a task queued for the scheduler) and reading tasks back,
    waiting for them up to a timeout."""
    store = service.store

    @app.post("/evaluate", response_model=EvaluateResponse)
    async def evaluate(req: EvaluateRequest) -> EvaluateResponse:
        try:
            task = service.create_task(req.solution, req.workload_uuids)
        except StoreFull:
            raise HTTPException(503, "every kept task is still waiting or running; poll "
                                "them and submit again later") from None
        try:
            scheduler.submit(task)
        except QueueFull:
            store.remove(task.id)
            raise HTTPException(429, "too many tasks waiting; wait for some to finish, or "
                                "start the server with a larger --max-queued") from None
        return EvaluateResponse(task_id=task.id, normalized_solution_name=task.solution_name)

    async def views(task_ids: list[str], timeout: float) -> list[TaskResponse]:
        for task_id in task_ids:
            if store.get(task_id) is None:
                raise HTTPException(404, f"task not found: {task_id}")
        deadline = asyncio.get_running_loop().time() + max(0.0, timeout)
        while store.unfinished(task_ids) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(POLL_S)
        out = []
        for task_id in task_ids:
            task = store.get(task_id)
            if task is None:  # dropped while waited for
                raise HTTPException(404, f"task not found: {task_id}")
            out.append(TaskResponse(**task.view()))
        return out

    @app.post("/tasks/batch", response_model=list[TaskResponse])
    async def tasks_batch(req: BatchRequest) -> list[TaskResponse]:
        return await views(req.task_ids, req.timeout)

    @app.get("/tasks/{task_id}", response_model=TaskResponse)
    async def task(task_id: str, timeout: float = Query(default=0.0, ge=0.0, le=MAX_WAIT_S)
                   ) -> TaskResponse:
        return (await views([task_id], timeout))[0]


def _add_server_routes(app: FastAPI, scheduler: Scheduler, on_shutdown: Callable[[], None]) -> None:
    """The server's own state (devices, queue) and its stop."""

    @app.get("/health", response_model=HealthResponse)
    async def health() -> HealthResponse:
        workers = [WorkerInfo(device=lane.device, healthy=lane.healthy)
                   for lane in scheduler.lanes]
        return HealthResponse(status="ok", workers=workers, queue_size=scheduler.queue_size)

    @app.post("/shutdown")
    async def shutdown() -> dict[str, str]:
        asyncio.get_running_loop().call_later(0.2, on_shutdown)
        return {"status": "shutting_down"}
