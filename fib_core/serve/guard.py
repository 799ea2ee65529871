"""The server's door: a bearer token on every request and a cap on request bodies, checked
before any route runs (an ASGI middleware, so a refused request never reaches the app).

A request without ``Authorization: Bearer <token>`` gets 401; a body over ``max_body`` bytes
gets 413, whether it declares its length or streams it. The whole body is read here (within
the cap) and handed on, so no route ever sees more than the cap.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def new_token() -> str:
    """A fresh random token (43 URL-safe characters).

    >>> len(new_token())
    43
    """
    return secrets.token_urlsafe(32)


class Guard:
    """Wrap ``app``: ``token`` None lets every request in (the server's ``--no-token``)."""

    def __init__(self, app: Any, token: str | None, max_body: int) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        if self.token is not None and not self._authorized(headers.get("authorization", "")):
            await _reply(send, 401, "missing or wrong token: send the header 'Authorization: "
                         "Bearer <token>' with the token the server printed at start",
                         [(b"www-authenticate", b"Bearer")])
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await _reply(send, 413, self._too_big())
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_body:
                await _reply(send, 413, self._too_big())
                return
            if not message.get("more_body", False):
                break
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _authorized(self, header: str) -> bool:
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(
            value.strip().encode(), str(self.token).encode())

    def _too_big(self) -> str:
        return (f"request body over {self.max_body} bytes; send a smaller solution, or start "
                "the server with a larger --max-body-mb")


async def _reply(send: Send, status: int, detail: str,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})
