"""A cap on request bodies, as a pure ASGI middleware.

A job spec is a few KiB (an inline hf_config a few more), so the default 1 MiB leaves room for any
real one while a 30 MB body can no longer grow the job store. The bytes are counted as they
arrive: a declared Content-Length over the cap is refused before reading, and a body sent without
one (chunked) or with a false one is cut off at the cap, so no header is trusted.
"""

from __future__ import annotations

import json

DEFAULT_MAX_BODY_BYTES = 1 << 20


def too_large_message(max_bytes: int) -> str:
    return (f"request body is over {max_bytes:,} bytes; a job spec is a few KiB: send a smaller body "
            "(the server's limit is set with `frenzy serve --max-body-bytes`)")


class BodyLimit:
    """Answers 413 (in the API's error shape) to a request whose body exceeds max_bytes."""

    def __init__(self, app, max_bytes: int = DEFAULT_MAX_BODY_BYTES):
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"max_body_bytes must be a positive integer, got {max_bytes!r}")
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > self.max_bytes):
            await self._reply(send)
            return
        state = {"received": 0, "started": False, "replied": False}

        async def limited_receive():
            if state["replied"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > self.max_bytes:
                    if not state["started"]:
                        await self._reply(send)
                    state["replied"] = True
                    return {"type": "http.disconnect"}  # the app stops reading; its reply is dropped
            return message

        async def guarded_send(message):
            if state["replied"]:
                return
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not state["replied"]:  # the app's own failure, not the cut-off body it was reading
                raise

    async def _reply(self, send) -> None:
        detail = too_large_message(self.max_bytes)
        body = json.dumps({"detail": detail, "errors": [{"loc": ["body"], "msg": detail}]}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
