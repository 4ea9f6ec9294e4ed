"""The page's scripts and styles (``/static``) and front-end packages (``/vendor``), kept in memory.

Starlette's ``StaticFiles`` checks and reads each file on worker threads, three or four hand-offs
per request; a page load asks for about forty files, and on a busy machine those hand-offs were a
large part of its first paint. ``KeptFiles`` answers a plain file of its folder from a copy kept
in memory, with the same headers and conditional answers (304) as ``StaticFiles``; the copy is
checked against the file (one ``stat``) on every request, so an edited file is served as edited.
Anything else (a sub-folder, a missing file) is left to ``StaticFiles`` as before.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from email.utils import formatdate
from mimetypes import guess_type

from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.staticfiles import NotModifiedResponse
from starlette.types import Scope

PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Kept:
    mtime_ns: int
    size: int
    body: bytes
    headers: dict[str, str]


class KeptFiles(StaticFiles):
    def __init__(self, *, directory: str, check_dir: bool = True) -> None:
        super().__init__(directory=directory, check_dir=check_dir)
        self.folder = directory
        self.kept: dict[str, Kept] = {}

    async def get_response(self, path: str, scope: Scope) -> Response:
        kept = self.keep(path) if scope["method"] in ("GET", "HEAD") else None
        if kept is None:
            return await super().get_response(path, scope)
        if self.is_not_modified(Headers(kept.headers), Headers(scope=scope)):
            return NotModifiedResponse(Headers(kept.headers))
        media_type = kept.headers["content-type"]
        return Response(kept.body, media_type=media_type,
                        headers={k: v for k, v in kept.headers.items() if k != "content-type"})

    def keep(self, path: str) -> Kept | None:
        """The kept copy of the file ``path`` names directly in the folder, read again if the file
        changed; None for anything else. A local ``stat`` (and a read when it changed) is a few
        microseconds: cheaper here than a hand-off to a worker thread."""
        if not PLAIN_NAME.fullmatch(path):
            return None
        full = os.path.join(self.folder, path)
        try:
            stat = os.stat(full)
        except OSError:
            return None
        if not os.path.isfile(full):
            return None
        kept = self.kept.get(path)
        if kept is None or (kept.mtime_ns, kept.size) != (stat.st_mtime_ns, stat.st_size):
            with open(full, "rb") as handle:
                body = handle.read()
            # The headers StaticFiles gives (its validator formula too, so a cached copy stays valid).
            tag = hashlib.md5(f"{stat.st_mtime}-{len(body)}".encode(), usedforsecurity=False).hexdigest()
            kept = Kept(stat.st_mtime_ns, stat.st_size, body, {
                "content-type": guess_type(path)[0] or "text/plain",
                "last-modified": formatdate(stat.st_mtime, usegmt=True),
                "etag": f'"{tag}"',
            })
            self.kept[path] = kept
        return kept
