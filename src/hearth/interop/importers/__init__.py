"""Importers (A5): outside archives into the deep archive as documents with labelled chunks.

``import_file`` reads bytes, checks they are valid UTF-8 (and valid JSON where JSON is expected)
before anything is written, picks the format from ``fmt`` or the content, and adds one archive
document per conversation, each in its own transaction. Re-importing the same file adds nothing
(content hashes), so an interrupted import is resumed simply by running it again (S8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from hearth.errors import InvalidInput
from hearth.retrieval.archive import check_document
from hearth.validation import check_text, load_json

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

FORMATS = ("auto", "chatgpt", "labelled")
Progress = Callable[[int, int], None]


@dataclass
class ImportReport:
    format: str
    documents_added: int = 0
    documents_skipped: int = 0  # already in the archive (same content)
    chunks_added: int = 0
    chunks_skipped: int = 0
    document_ids: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def decode(data: bytes, name: str = "file") -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{name} is not valid UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        raise InvalidInput(f"{name} contains NUL characters; it is not a text export")
    return text


def detect(text: str) -> str:
    head = text.lstrip()[:1]
    return "chatgpt" if head in ("[", "{") else "labelled"


def import_bytes(archive: Any, data: bytes, *, fmt: str = "auto", name: str = "import", collection: str = "imports",
                 document_date: str | None = None, progress: Progress | None = None,
                 persona: Any = None) -> ImportReport:
    """Parse everything first (nothing is written on a parse error), then add document by document.

    ``persona`` gives the speaker labels for formats that only know roles (ChatGPT exports).
    """
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown import format {fmt!r}; expected one of {', '.join(FORMATS)}")
    name = check_text(name, "the import name", max_chars=300, required=True)
    if document_date is not None and not (isinstance(document_date, str) and DATE.match(document_date)):
        raise InvalidInput("document date must be YYYY-MM-DD")
    text = decode(data, name)
    if not text.strip():
        raise InvalidInput(f"{name} is empty")
    fmt = detect(text) if fmt == "auto" else fmt
    if fmt == "chatgpt":
        from hearth.interop.importers.chatgpt import parse as parse_chatgpt

        payload = load_json(text, name)
        labels = {"user": persona.user_label, "assistant": persona.assistant_label} if persona else None
        documents = parse_chatgpt(payload, labels)
    else:
        from hearth.interop.importers.labelled import parse as parse_labelled

        documents = parse_labelled(text, archive.labels(), title=name, document_date=document_date)
    for doc in documents:  # every document is checked before the first is written
        check_document(doc.title, collection)
    report = ImportReport(fmt)
    total = len(documents)
    if progress:
        progress(0, total)
    for i, doc in enumerate(documents, start=1):
        result = archive.add_turns(doc.title, doc.turns, collection=collection, source=fmt,
                                   document_date=doc.date, metadata=doc.metadata, hash_text=doc.hash_text)
        if result.created:
            report.documents_added += 1
            report.document_ids.append(result.document.id)
        else:
            report.documents_skipped += 1
        report.chunks_added += result.chunks_added
        report.chunks_skipped += result.chunks_skipped
        if progress:
            progress(i, total)
    return report
