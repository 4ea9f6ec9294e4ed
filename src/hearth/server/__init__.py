"""Hearth's HTTP server: a FastAPI app over the core library, with owner auth and the web UI.

    from hearth.server import create_app, check_bind
    app = create_app(settings)          # or create_app(settings, hearth)

``check_bind(settings, hearth)`` raises ``ConfigError`` when an open (password-less) server would
listen on a non-loopback address; ``hearth serve`` calls it before binding.
"""

from ..extras import require

require("fastapi", "server", "the HTTP server")
require("uvicorn", "server", "the HTTP server")

from .app import create_app  # noqa: E402  (after the clear error for a missing extra)
from .auth import check_bind, current_scope, require_owner_with_password  # noqa: E402

__all__ = ["check_bind", "create_app", "current_scope", "require_owner_with_password"]
