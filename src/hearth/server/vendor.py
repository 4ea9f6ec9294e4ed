"""The web UI's third-party front-end files (a Markdown renderer, an HTML sanitiser, a code
highlighter and a maths typesetter whose MathML output needs no stylesheet or fonts).

They come from npm, pinned by the repository's package-lock.json, and ``make install`` copies them
into ``build/vendor/`` of the source checkout (``npm ci``); nothing third-party is committed. The
server serves that folder at ``/vendor``. ``web_vendor_dir`` (``HEARTH_WEB_VENDOR_DIR``) points
elsewhere for an installed package.
"""

from __future__ import annotations

from pathlib import Path

from ..settings import Settings

# The files the page imports, by the names the Makefile gives them.
FILES = ("markdown-it.js", "purify.js", "highlight.js", "katex.js")
# The ones preloaded with the page; highlight.js and KaTeX are fetched when a message first holds
# code or maths (markdown.js).
PRELOAD = ("markdown-it.js", "purify.js")


def vendor_dir(settings: Settings) -> Path:
    if settings.web_vendor_dir:
        return Path(settings.web_vendor_dir).expanduser()
    return Path(__file__).resolve().parents[3] / "build" / "vendor"


def missing(folder: Path) -> list[str]:
    """Names of the front-end files that are not in ``folder``."""
    return [name for name in FILES if not (folder / name).is_file()]


def missing_message(folder: Path) -> str:
    return (f"the web UI's front-end packages are missing from {folder} ({', '.join(missing(folder))}):"
            " run `make install` (it runs `npm ci`) or set HEARTH_WEB_VENDOR_DIR")
