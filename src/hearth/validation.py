"""One set of input checks for every face of Hearth (U3): the library, the CLI and the HTTP edge.

The core calls these before it writes; the HTTP request models run the same checks on every
string they carry, so a bad value gets the same answer whichever door it came through.

The rules:

* text never holds a NUL character (SQLite's text functions would see the value cut short) nor a
  lone UTF-16 surrogate (it cannot be stored as UTF-8);
* an id is a whole number from 1 to 2**63 - 1 (SQLite integers are signed 64-bit);
* a field over its length limit is ``InvalidInput`` like any other invalid value (HTTP 422); only
  a request body or uploaded file over its size limit is ``TooLarge`` (HTTP 413);
* a JSON document is walked iteratively with a depth limit, so hostile nesting is a clear error
  instead of a RecursionError.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import InvalidInput

MAX_ID = 2**63 - 1
MAX_JSON_DEPTH = 64


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None when it can."""
    if "\x00" in value:
        return f"contains a NUL character (at {value.index(chr(0))})"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"contains a lone surrogate (at {exc.start})"
    return None


def check_text(value: Any, what: str, *, max_chars: int | None = None, required: bool = False,
               strip: bool = False) -> str:
    """``value`` as storable text, or ``InvalidInput`` naming ``what`` and the reason."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text")
    problem = text_problem(value)
    if problem:
        raise InvalidInput(f"{what} {problem}")
    if strip:
        value = value.strip()
    if required and not value.strip():
        raise InvalidInput(f"{what} must not be empty")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInput(f"{what} is longer than {max_chars} characters")
    return value


def check_id(value: Any, what: str = "id") -> int:
    """``value`` as an id (1 .. 2**63-1), or ``InvalidInput``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{what} must be a whole number")
    if not 1 <= value <= MAX_ID:
        raise InvalidInput(f"{what} must be between 1 and {MAX_ID}")
    return value


def check_tree(value: Any, what: str = "value", *, max_depth: int = MAX_JSON_DEPTH, paths: bool = False) -> None:
    """Every string (keys too) in a JSON-like value is storable text; nesting is bounded.

    Iterative, so a hostile depth costs a loop, never the interpreter stack. With ``paths`` an
    error names where in the value the bad text is (``data.description in lily.png ...``), for
    files a person made elsewhere and needs to find the field in.
    """
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                raise InvalidInput(f"{path} in {what} {problem}" if paths and path else f"{what} {problem}")
        elif isinstance(item, (dict, list, tuple)):
            if depth >= max_depth:
                raise InvalidInput(f"{what} is nested more than {max_depth} levels deep")
            if isinstance(item, dict):
                for key, child in item.items():
                    child_path = json_path(path, key) if paths else ""
                    stack.append((key, depth + 1, child_path + " (a field name)" if paths else ""))
                    stack.append((child, depth + 1, child_path))
            else:
                stack.extend((child, depth + 1, f"{path}[{n}]" if paths else "") for n, child in enumerate(item))
        elif isinstance(item, int) and not isinstance(item, bool) and not -MAX_ID - 1 <= item <= MAX_ID:
            raise InvalidInput(f"{path} in {what} holds a number outside the 64-bit range" if paths and path
                               else f"{what} holds a number outside the 64-bit range")


def json_path(parent: str, key: Any) -> str:
    """``parent.key``, or ``parent["key"]`` when the key is not a plain name (``entries["3"]``)."""
    name = str(key)
    if name.isidentifier():
        return f"{parent}.{name}" if parent else name
    return f"{parent}[{json.dumps(name, ensure_ascii=False)}]"


def load_json(text: str | bytes, what: str = "the file", *, max_depth: int = MAX_JSON_DEPTH,
              paths: bool = False) -> Any:
    """Parse JSON text into a value whose strings are storable and whose nesting is bounded."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        # The C decoder recurses per nesting level; hostile depth ends here, not in a traceback.
        raise InvalidInput(f"{what} is nested more than {max_depth} levels deep") from None
    check_tree(value, what, max_depth=max_depth, paths=paths)
    return value
