"""The installable app (W5): the web manifest, the app icons and the service worker.

The icons are drawn here with Pillow (the hearth mark of the page's brand, on the page's colours), so
no image file, ours or anyone's, is shipped. The service worker is ``static/sw.js`` with the list of
shell files and a version put in front of it: a change to any shell file changes the worker's
bytes, so browsers install the new one and drop the old cache. Every route here is public (the
browser fetches the manifest and its icons without the session cookie) and holds nothing personal.
"""

from __future__ import annotations

import hashlib
import io
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
from fastapi import FastAPI
from fastapi.responses import Response
from PIL import Image

from .. import __version__
from ..errors import NotFound

STATIC = Path(__file__).parent / "static"
ICON_SIZES = (192, 512)
# The page's light colours (app.css): the background, the panel behind the top bar, the accent.
BACKGROUND = "#faf6f1"
THEME = "#fffdfa"
ACCENT = (0xA8, 0x46, 0x1F)
GLOW = (0xF4, 0xB8, 0x60)
CREAM = (0xFA, 0xF6, 0xF1)
ICON_PATHS = [f"/icons/hearth-{size}.png" for size in ICON_SIZES] + ["/icons/hearth-maskable-512.png"]


def manifest() -> dict[str, object]:
    icons: list[dict[str, str]] = [{"src": f"/icons/hearth-{size}.png", "sizes": f"{size}x{size}",
                                    "type": "image/png", "purpose": "any"} for size in ICON_SIZES]
    icons.append({"src": "/icons/hearth-maskable-512.png", "sizes": "512x512", "type": "image/png",
                  "purpose": "maskable"})
    return {
        "name": "Hearth",
        "short_name": "Hearth",
        "description": "Your companions, with the memory of everything you shared.",
        "id": "/",
        "start_url": "/",
        "scope": "/",
        "display": "standalone",
        "background_color": BACKGROUND,
        "theme_color": THEME,
        "icons": icons,
    }


@lru_cache(maxsize=8)
def icon_png(size: int, maskable: bool = False) -> bytes:
    """The hearth mark (a glowing ember, as ``.brand-mark`` in app.css) on a cream tile.

    Drawn at twice the size and scaled down, so the edges are smooth. A maskable icon fills the
    square and keeps the mark inside the middle 60 % (the safe zone is the middle 80 %)."""
    big = size * 2
    axis = (np.arange(big, dtype=np.float32) + 0.5) / big  # 0..1
    yy, xx = axis[:, None], axis[None, :]
    tile = np.zeros((big, big, 4), dtype=np.float32)
    tile[..., :3] = CREAM
    if maskable:
        tile[..., 3] = 255
    else:
        # A rounded square (corner radius 22 % of the side) with a thin margin.
        margin, radius = 0.04, 0.22
        cx = np.clip(xx, margin + radius, 1 - margin - radius)
        cy = np.clip(yy, margin + radius, 1 - margin - radius)
        tile[..., 3] = np.where(np.hypot(xx - cx, yy - cy) <= radius, 255, 0)
    # The ember: an egg shape (wider at the bottom), its glow centred low as in the page's mark.
    half = 0.32 if maskable else 0.36
    dx = (xx - 0.5) / half
    dy = (yy - 0.52) / (half * 1.08)
    squeeze = 1 + 0.09 * (1 - dy)  # narrower towards the top
    ember = (dx * squeeze) ** 2 + dy**2 <= 1
    glow = np.hypot(xx - 0.5, yy - (0.52 + 0.4 * half)) / (half * 1.6)  # 0 at the glow's centre
    mix = np.clip((glow - 0.3) / 0.45, 0, 1)[..., None]  # warm core up to 30 %, accent from 75 %
    colour = np.asarray(GLOW, np.float32) * (1 - mix) + np.asarray(ACCENT, np.float32) * mix
    tile[..., :3] = np.where(ember[..., None], colour, tile[..., :3])
    image = Image.fromarray(tile.round().astype(np.uint8), "RGBA").resize((size, size), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def service_worker(shell: list[str]) -> str:
    """``static/sw.js`` with the shell's paths and a version drawn from the files' contents."""
    digest = hashlib.sha256(__version__.encode())
    for name in sorted(p.name for p in STATIC.iterdir() if p.is_file()):
        digest.update(name.encode())
        digest.update((STATIC / name).read_bytes())
    version = digest.hexdigest()[:16]
    head = f"const VERSION = {json.dumps(version)};\nconst SHELL = {json.dumps(shell)};\n"
    return head + (STATIC / "sw.js").read_text(encoding="utf-8")


def install(app: FastAPI, modules: list[str]) -> None:
    """The manifest, the icons and ``/sw.js`` (at the root, so its scope is the whole app)."""
    shell = ["/", "/static/app.css", "/static/theme.js", "/manifest.webmanifest", *ICON_PATHS, *modules]
    # Built once: the static files do not change while the server runs.
    worker = service_worker(shell)
    body = json.dumps(manifest(), indent=1)

    @app.get("/manifest.webmanifest", tags=["pages"], response_class=Response,
             responses={200: {"description": "The web app manifest", "content": {"application/manifest+json": {}}}})
    def web_manifest() -> Response:
        """The web app manifest: name, start page, standalone display, theme colour and icons."""
        return Response(body, media_type="application/manifest+json", headers={"Cache-Control": "no-cache"})

    @app.get("/sw.js", tags=["pages"], response_class=Response,
             responses={200: {"description": "The service worker's script", "content": {"text/javascript": {}}}})
    def sw() -> Response:
        """The service worker: keeps a copy of the app shell (never an API answer)."""
        # no-cache: the browser checks for a new worker on every visit.
        return Response(worker, media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    @app.get("/icons/{name}", tags=["pages"], response_class=Response,
             responses={200: {"description": "The icon, a PNG", "content": {"image/png": {}}}})
    def icon(name: str) -> Response:
        """The app icon named in the manifest: hearth-192.png, hearth-512.png or hearth-maskable-512.png."""
        sizes = {f"hearth-{size}.png": (size, False) for size in ICON_SIZES}
        sizes["hearth-maskable-512.png"] = (512, True)
        if name not in sizes:
            raise NotFound("no such icon")
        size, maskable = sizes[name]
        return Response(icon_png(size, maskable), media_type="image/png",
                        headers={"Cache-Control": "public, max-age=86400"})
