"""The library: a per-user folder of files the companion may read on purpose (A4).

Files live under ``$HEARTH_HOME/library/<user id>/`` and are put there by the person (copied in by
hand, or through ``Library.save``). The model reads them only through the ``read_library_file``
tool, which lists the folder or returns one text file. Paths are resolved and must stay inside the
user's folder: ``..``, absolute paths and symbolic links that lead elsewhere are refused.
"""

from __future__ import annotations

from pathlib import Path

from hearth.errors import InvalidInput, NotFound, TooLarge

MAX_READ_CHARS = 40_000
MAX_SAVE_BYTES = 5_000_000
MAX_LISTED = 200
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".csv", ".json", ".html", ".htm", ".xml", ".yaml", ".yml",
                           ".toml", ".log", ".rst", ".org", ""})


class Library:
    def __init__(self, home: str | Path, user_id: int):
        self.root = Path(home) / "library" / str(int(user_id))

    def resolve(self, relative: str) -> Path:
        """The file a relative path names, refusing anything outside the user's folder."""
        if not isinstance(relative, str):
            raise InvalidInput("path must be text")
        relative = relative.strip().replace("\\", "/")
        if "\x00" in relative:
            raise InvalidInput("path contains a NUL character")
        candidate = Path(relative)
        if candidate.is_absolute() or any(part == ".." for part in candidate.parts):
            raise InvalidInput("library paths are relative to the library folder and may not contain '..'")
        root = self.root.resolve()
        target = (root / candidate).resolve()
        if target != root and root not in target.parents:
            raise InvalidInput("that path leads outside the library folder")
        return target

    def list(self) -> list[dict[str, object]]:
        if not self.root.is_dir():
            return []
        root = self.root.resolve()
        out: list[dict[str, object]] = []
        for path in sorted(root.rglob("*")):
            if len(out) >= MAX_LISTED:
                break
            try:
                real = path.resolve()
            except OSError:
                continue
            if not path.is_file() or (real != root and root not in real.parents):
                continue
            out.append({"path": path.relative_to(root).as_posix(), "bytes": path.stat().st_size})
        return out

    def read(self, relative: str, max_chars: int = MAX_READ_CHARS) -> str:
        target = self.resolve(relative)
        if not target.is_file():
            raise NotFound(f"no library file {relative!r}")
        if target.suffix.lower() not in TEXT_SUFFIXES:
            raise InvalidInput(f"{relative!r} is not a text file the library can read")
        try:
            text = target.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{relative!r} is not valid UTF-8 text") from None
        if len(text) > max_chars:
            text = text[:max_chars] + f"\n[… cut at {max_chars} characters of {len(text)}]"
        return text

    def save(self, relative: str, data: bytes) -> Path:
        if len(data) > MAX_SAVE_BYTES:
            raise TooLarge(f"library files are limited to {MAX_SAVE_BYTES} bytes")
        target = self.resolve(relative)
        if target == self.root.resolve():
            raise InvalidInput("a library file needs a name")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return target
