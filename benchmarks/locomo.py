"""LoCoMo turn-level evidence recall through Hearth's own retrieval.

    python benchmarks/locomo.py [--data FILE] [--k 5 10 25 50] [--json] [--no-vectors] [--limit N] [--store DIR]

Loads LoCoMo-format data into a fresh store through the public API: each sample becomes a user
with a persona whose labels are the two speakers' names, each session a conversation created at
the session's date, each turn a message at that date keeping its ``dia_id`` in metadata. Then
every question goes through ``hearth.retrieval.hybrid.search`` (the function behind the search
tools, the owner's search and archive recall) and the script reports the share of evidence turns
found in the top k, per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial), for 1-4 together and for all, beside a plain BM25 baseline from the same run.
Each search gets the persona's speaker names and ignored names exactly as archive recall and the
search tools pass them. ``--store DIR`` keeps the loaded and embedded store for quicker reruns.
With ``--json`` the last line is one JSON object: {"recall": {...}, "bm25": {...}, "questions": n}.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hearth import Hearth, Settings  # noqa: E402
from hearth.errors import NotFound  # noqa: E402
from hearth.layers.keyword_recall import persona_names  # noqa: E402
from hearth.retrieval.hybrid import Filters, search  # noqa: E402
from hearth.retrieval.keyword import search_messages, terms  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "locomo" / "locomo-dev.json"
CATEGORIES = ("1", "2", "3", "4", "5")


def session_time(text: str) -> str:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08T13:56:00.000000Z'."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000000Z")


def evidence_ids(raw: list) -> set[str]:
    """Evidence ids, parsed defensively ("D8:6; D9:17", "D:11:26", "D30:05")."""
    out = set()
    for item in raw or []:
        for m in re.finditer(r"D:?(\d+):(\d+)", str(item)):
            out.add(f"D{int(m.group(1))}:{int(m.group(2))}")
    return out


def load(hearth: Hearth, sample: dict) -> tuple[int, dict[int, str]]:
    """One sample into the store; returns (user id, message id -> dia_id)."""
    conv = sample["conversation"]
    user = hearth.users.create(sample["sample_id"])
    scope = hearth.scope(user.id)
    a, b = conv["speaker_a"], conv["speaker_b"]
    persona = scope.personas.create("locomo", b, user_label=f"{a} said:", assistant_label=f"{b} said:")
    dia: dict[int, str] = {}
    sessions = sorted((int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k)))
    for n in sessions:
        when = session_time(conv[f"session_{n}_date_time"])
        c = scope.conversations.create(persona.id, title=f"Session {n}", created_at=when, channel="import")
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            role = "user" if turn["speaker"] == a else "assistant"
            stamp = when[:-8] + f"{i:06d}Z"  # keep turn order inside the session's minute
            m = scope.conversations.add_message(c.id, role, text, channel="import", created_at=stamp,
                                                metadata={"dia_id": turn["dia_id"]})
            dia[m.id] = turn["dia_id"]
    return user.id, dia


def reuse(hearth: Hearth, sample: dict) -> tuple[int, dict[int, str]] | None:
    """A sample loaded by an earlier run into a kept store (--store), or None."""
    try:
        user = hearth.users.by_name(sample["sample_id"])
    except NotFound:
        return None
    rows = hearth.store.connection().execute(
        "SELECT id, json_extract(metadata, '$.dia_id') FROM messages WHERE user_id = ? AND kind = 'chat'", (user.id,))
    return user.id, {r[0]: r[1] for r in rows if r[1]}


def recall_at(found: list[str], gold: set[str], k: int) -> float:
    return len(gold & set(found[:k])) / len(gold)


def summarise(scores: dict[str, dict[int, list[float]]], ks: list[int]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    groups = {**{c: [c] for c in CATEGORIES}, "1-4": ["1", "2", "3", "4"], "all": list(CATEGORIES)}
    for name, cats in groups.items():
        out[name] = {}
        for k in ks:
            values = [v for c in cats for v in scores.get(c, {}).get(k, [])]
            out[name][str(k)] = round(sum(values) / len(values), 4) if values else 0.0
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 25, 50])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-vectors", action="store_true", help="keyword signals only (no embedding model)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N samples")
    parser.add_argument("--store", default="", help="keep the loaded store in this folder and reuse it on later runs")
    args = parser.parse_args(argv)
    ks = sorted(set(args.k))
    samples = json.loads(Path(args.data).read_text(encoding="utf-8"))
    if args.limit:
        samples = samples[:args.limit]
    ours: dict[str, dict[int, list[float]]] = {}
    bm25: dict[str, dict[int, list[float]]] = {}
    questions = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        home = args.store or scratch
        settings = Settings.resolve({"home": home}, environ={})
        with Hearth(settings) as hearth:
            loaded = [(s, *(reuse(hearth, s) or load(hearth, s))) for s in samples]
            embedder = None
            if not args.no_vectors:
                from hearth.retrieval.semantic import embed_pending, shared_embedder

                embedder = shared_embedder(hearth)
                embed_pending(hearth.store, embedder)
            log(f"loaded {sum(len(d) for _, _, d in loaded)} turns in {time.monotonic() - started:.1f}s")
            conn = hearth.store.connection()
            top = max(ks)
            for sample, user_id, dia in loaded:
                scope = hearth.scope(user_id)
                persona = scope.personas.default()
                speakers = {persona.user_label[:-6]: "user", persona.assistant_label[:-6]: "assistant"}
                for qa in sample["qa"]:
                    gold = evidence_ids(qa.get("evidence"))
                    if not gold:
                        continue
                    cat = str(qa["category"])
                    questions += 1
                    outcome = search(conn, user_id, str(qa["question"]), filters=Filters(sources=("messages",)),
                                     limit=top, embedder=embedder, db_key=str(hearth.store.path),
                                     speaker_names=speakers, ignore_names=persona_names(persona), log=False)
                    found = [dia.get(r.id, "") for r in outcome.results]
                    plain = search_messages(conn, user_id, terms(str(qa["question"])), limit=top)
                    base = [dia.get(h.message_id, "") for h in plain]
                    for k in ks:
                        ours.setdefault(cat, {}).setdefault(k, []).append(recall_at(found, gold, k))
                        bm25.setdefault(cat, {}).setdefault(k, []).append(recall_at(base, gold, k))
    result = {"recall": summarise(ours, ks), "bm25": summarise(bm25, ks), "questions": questions}
    log(f"{questions} questions in {time.monotonic() - started:.1f}s")
    header = "category  " + "  ".join(f"R@{k:<5}" for k in ks) + "   | BM25 " + "  ".join(f"R@{k:<5}" for k in ks)
    print(header)
    for name in (*CATEGORIES, "1-4", "all"):
        row = "  ".join(f"{result['recall'][name][str(k)]:<7.3f}" for k in ks)
        base = "  ".join(f"{result['bm25'][name][str(k)]:<7.3f}" for k in ks)
        print(f"{name:<9} {row}   |      {base}")
    if args.json:
        print(json.dumps(result))
    return result


def log(message: str) -> None:
    print(message, file=sys.stderr)


if __name__ == "__main__":
    main()
