"""The request-body limit of `/mcp`, without copying the body (issue 46: image calls held ~7.5x their body).

The SDK's own limit (transport_security.RequestBodyLimitMiddleware) gathers the body into a bytearray, hands the app
a bytes copy of it, and keeps the bytearray until the call ends: two copies of a 27 MB body for the whole call,
beside the one Starlette joins and the parsed JSON. This one counts the chunks as they arrive (413 past the limit,
as the SDK answers, and at once when Content-Length says so) and replays them as they came: Starlette joins them
into the one body the SDK parses, and each chunk is let go once read.
"""

from __future__ import annotations

from collections import deque

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOO_LARGE = "Request body too large"  # the SDK's words


class BodyLimit:
    def __init__(self, app: ASGIApp, max_body_size: int) -> None:
        self.app = app
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_size:
            await Response(TOO_LARGE, status_code=413)(scope, receive, send)
            return
        messages: deque[Message] = deque()
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_body_size:
                messages.clear()
                await Response(TOO_LARGE, status_code=413)(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.popleft() if messages else await receive()

        await self.app(scope, replay, send)
