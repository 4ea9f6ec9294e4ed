"""A local realtime speech server speaking the Realtime API's WebSocket event format.

It records every client event (``session.update``, ``conversation.item.create``,
``input_audio_buffer.append``) and the Authorization header, and plays a script: once a turn's worth
of audio has arrived it sends the user's transcription, a chunk of output audio, the assistant's
transcript and ``response.done``, as the real service does. ``drop_after_user`` makes it close the
socket abruptly right after the user's transcript, to exercise a session that drops mid-way.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeRealtime:
    turns: list[tuple[str, str]] = field(default_factory=lambda: [("I'm walking home now", "Walk safe, I'm here.")])
    turn_bytes: int = 4_800
    drop_after_user: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)
    authorization: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _server: Any = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1"

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    async def _handle(self, ws: Any) -> None:
        self.paths.append(ws.request.path)
        self.authorization.append(ws.request.headers.get("Authorization", ""))
        counter = 0

        async def send(event: dict[str, Any]) -> None:
            nonlocal counter
            counter += 1
            await ws.send(json.dumps({"event_id": f"evt_{counter}", **event}))

        await send({"type": "session.created", "session": {"type": "realtime", "id": "sess_1"}})
        heard = 0
        turns = list(self.turns)
        async for raw in ws:
            event = json.loads(raw)
            self.events.append(event)
            if event["type"] == "session.update":
                await send({"type": "session.updated", "session": event["session"]})
            elif event["type"] == "input_audio_buffer.append":
                heard += len(base64.b64decode(event["audio"]))
                if heard >= self.turn_bytes and turns:
                    heard = 0
                    user, assistant = turns.pop(0)
                    await send({"type": "conversation.item.input_audio_transcription.completed",
                                "item_id": "item_u", "content_index": 0, "transcript": user})
                    if self.drop_after_user:
                        await asyncio.sleep(0.3)  # let the transcript leave before the line goes dead
                        ws.transport.abort()
                        return
                    await send({"type": "response.output_audio.delta", "response_id": "resp_1", "item_id": "item_a",
                                "output_index": 0, "content_index": 0,
                                "delta": base64.b64encode(bytes(range(256)) * 4).decode()})
                    await send({"type": "response.output_audio_transcript.done", "response_id": "resp_1",
                                "item_id": "item_a", "output_index": 0, "content_index": 0, "transcript": assistant})
                    await send({"type": "response.done", "response": {"id": "resp_1", "status": "completed"}})

    def start(self) -> "FakeRealtime":
        from websockets.asyncio.server import serve

        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()

        async def up() -> Any:
            return await serve(self._handle, "127.0.0.1", 0)

        self._server = asyncio.run_coroutine_threadsafe(up(), self._loop).result(60)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        assert self._loop is not None

        async def down() -> None:
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(down(), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
