"""Reading export archives (.zip) safely (X4).

An export zip is read in memory, never extracted to disk, and only the one member we need is
read. Before that the whole directory is checked: too many members, a member name that is
absolute or climbs out (``..``, a drive letter, a backslash path), a declared size over the limit
or a compression ratio that only a decompression bomb has are refused. The member is then read
with a hard cap, so a header that lies about its size cannot make us read more.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath

from hearth.errors import InvalidInput, TooLarge

MAX_MEMBERS = 50_000
MAX_MEMBER_BYTES = 512 * 1024 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
MAX_RATIO = 200  # uncompressed / compressed; text compresses ~10x, bombs 1000x and more


def is_zip(data: bytes) -> bool:
    return data[:4] == b"PK\x03\x04"


def _check_name(name: str) -> None:
    if "\x00" in name or "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise InvalidInput(f"the archive holds an unsafe file name {name[:80]!r}")
    if any(part == ".." for part in PurePosixPath(name).parts):
        raise InvalidInput(f"the archive holds a file name that climbs out of it {name[:80]!r}")


def read_member(data: bytes, wanted: str, label: str = "the archive", *,
                max_member_bytes: int = MAX_MEMBER_BYTES) -> bytes:
    """The bytes of ``wanted`` (at the top level or in one top folder) after checking the archive."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise InvalidInput(f"{label} is not a readable zip file ({type(exc).__name__})") from None
    with archive:
        try:
            members = archive.infolist()
        except (zipfile.BadZipFile, ValueError, OSError) as exc:
            raise InvalidInput(f"{label} is not a readable zip file ({type(exc).__name__})") from None
        if len(members) > MAX_MEMBERS:
            raise TooLarge(f"{label} holds more than {MAX_MEMBERS} files")
        total = 0
        found = None
        for info in members:
            _check_name(info.filename)
            total += info.file_size
            if info.file_size > max_member_bytes or total > MAX_TOTAL_BYTES:
                raise TooLarge(f"{label} unpacks to more than it may ({info.filename[:80]!r} is too large)")
            if info.file_size > 1_000_000 and info.file_size > MAX_RATIO * max(info.compress_size, 1):
                raise InvalidInput(f"{label} looks like a decompression bomb ({info.filename[:80]!r})")
            parts = PurePosixPath(info.filename).parts
            if parts and parts[-1] == wanted and len(parts) <= 2 and not info.is_dir():
                if found is None or len(parts) < len(PurePosixPath(found.filename).parts):
                    found = info
        if found is None:
            raise InvalidInput(f"{label} holds no {wanted}")
        if found.flag_bits & 0x1:
            raise InvalidInput(f"{label} is encrypted")
        try:
            with archive.open(found) as member:
                out = member.read(max_member_bytes + 1)
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
            raise InvalidInput(f"{label}: {wanted} cannot be read ({type(exc).__name__})") from None
        if len(out) > max_member_bytes:
            raise TooLarge(f"{label}: {wanted} is larger than {max_member_bytes} bytes")
        return out
