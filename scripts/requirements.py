"""Refresh docs/requirements.md from the tree: which modules name each requirement ID and which
tests prove it (a test names the IDs it proves in its function name, lowercase between
underscores). The ID and requirement columns stay as written; run ``make requirements``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "requirements.md"
ROW = re.compile(r"^\| (?P<id>[A-Z]{1,2}\d+) \| (?P<text>.*?) \| .*? \| .*? \|$")
SHOWN = 6


def tests_by_id() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                for token in set(node.name.split("_")[1:]):
                    if re.fullmatch(r"[a-z]{1,2}\d+", token):
                        found.setdefault(token.upper(), []).append(f"{path.stem}::{node.name}")
    return found


def modules_by_id(ids: list[str]) -> dict[str, list[str]]:
    sources = {p.relative_to(ROOT / "src").as_posix(): p.read_text(encoding="utf-8")
               for p in sorted((ROOT / "src" / "hearth").rglob("*.py"))}
    return {i: [name for name, text in sources.items() if re.search(rf"\b{i}\b", text)] for i in ids}


def cell(items: list[str], sep: str, more: str, empty: str) -> str:
    if not items:
        return empty
    text = sep.join(f"`{x}`" for x in items[:SHOWN])
    return text + more.format(len(items) - SHOWN) if len(items) > SHOWN else text


def main() -> None:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    ids = [m["id"] for line in lines if (m := ROW.match(line))]
    tests, modules = tests_by_id(), modules_by_id(ids)
    out = []
    for line in lines:
        m = ROW.match(line)
        if m:
            i = m["id"]
            line = (f"| {i} | {m['text']} | {cell(modules[i], ', ', ' …', '—')} | "
                    f"{cell(tests.get(i, []), '<br>', '<br>… and {} more', 'no test names it')} |")
        out.append(line)
    text = "\n".join(out)
    head, _sep, _old = text.partition("## Not yet proved by a named test")
    unproved = ", ".join(i for i in ids if i not in tests) or "none"
    PAGE.write_text(f"{head}## Not yet proved by a named test\n\n{unproved}\n", encoding="utf-8")


if __name__ == "__main__":
    main()
