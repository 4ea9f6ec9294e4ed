"""Avatar images (W3): what an upload must be before it is stored with ``personas.set_avatar``.

The bytes are opened with Pillow, so the type is what the image really is, not what the upload
claims; images too large in bytes or in pixels are refused before anything is stored.
"""

from __future__ import annotations

import io
import warnings

from PIL import Image

from hearth.errors import InvalidInput

MAX_BYTES = 900_000  # under the server's default request body limit
MAX_SIDE = 4096
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}


def checked_image(data: bytes, declared: str | None = None) -> str:
    """The image's MIME type; ``InvalidInput`` for anything that is not a small PNG, JPEG, WebP or GIF."""
    if not data:
        raise InvalidInput("the avatar is empty")
    if len(data) > MAX_BYTES:
        raise InvalidInput(f"an avatar may be at most {MAX_BYTES // 1000} kB")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                kind, (width, height) = image.format, image.size
                image.verify()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise InvalidInput("the avatar is not a readable PNG, JPEG, WebP or GIF image") from None
    mime = FORMATS.get(kind or "")
    if mime is None:
        raise InvalidInput(f"an avatar must be PNG, JPEG, WebP or GIF, not {kind}")
    if declared and declared.split(";")[0].strip().lower() not in (mime, "application/octet-stream"):
        raise InvalidInput(f"the avatar was sent as {declared} but is {mime}")
    if width > MAX_SIDE or height > MAX_SIDE:
        raise InvalidInput(f"an avatar may be at most {MAX_SIDE}x{MAX_SIDE} pixels")
    return mime
