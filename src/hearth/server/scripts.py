"""The web page's own ES modules: those its first paint runs, named in the page as modulepreload
hints (the browser fetches them at once instead of discovering them import by import), and all of
them (the installable app's shell keeps every one, for use offline).

app.js, the entry, starts the first screen's reads and then imports shell.js, which imports the
chat's modules statically and each other panel's module with ``import()`` the first time that panel
is shown; following the static imports from those two gives the first paint's modules: a panel
nobody has opened costs the page nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

STATIC = Path(__file__).parent / "static"
# The entry and the shell it imports at once (dynamically: its reads start before the shell's modules
# have arrived).
ROOTS = ("app.js", "shell.js")
# The login page's script, the classic script that applies the theme before the first paint, and the
# service worker: none of them is a module of the page.
NOT_MODULES = ("login.js", "theme.js", "sw.js")
# A static import or re-export at the start of a line (`import x from "./a.js"`, `import "./a.js"`,
# `export { x } from "./a.js"`); `import("./a.js")`, a dynamic import, is not one.
_STATIC_IMPORT = re.compile(r"""^(?:import|export)\s+(?:[\w$*{}\s,]+?\s+from\s+)?["']([^"']+)["']""", re.M)


def static_imports(source: str) -> list[str]:
    """The specifiers of the static imports and re-exports in one module's source, in order."""
    return _STATIC_IMPORT.findall(source)


def first_paint(static: Path = STATIC) -> list[str]:
    """URL paths of the roots and every module they import statically, directly or through another:
    each root's before the next root (the entry's few first, so its reads start soonest), in the
    order met, the vendor files markdown.js imports among them (as ``/vendor/<name>``)."""
    order: list[str] = []
    for root in ROOTS:
        walked = len(order)
        if f"/static/{root}" not in order:
            order.append(f"/static/{root}")
        while walked < len(order):  # each module's imports join the end of the list
            path = order[walked]
            walked += 1
            if not path.startswith("/static/"):
                continue
            for spec in static_imports((static / path.removeprefix("/static/")).read_text(encoding="utf-8")):
                url = f"/static/{spec.removeprefix('./')}" if spec.startswith("./") else spec
                if url not in order:
                    order.append(url)
    return order


def all_modules(static: Path = STATIC) -> list[str]:
    """URL paths of every module of the page (the panels' too), by name."""
    return [f"/static/{p.name}" for p in sorted(static.glob("*.js")) if p.name not in NOT_MODULES]
