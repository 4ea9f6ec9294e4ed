"""LoCoMo turn-level evidence recall through Hearth's own retrieval.

    python benchmarks/locomo.py [--data FILE] [--k 5 10 25 50] [--json] [--no-vectors] [--limit N] [--store DIR]
                                [--config send|owner|statements|both ...] [--folds]

Loads LoCoMo-format data into a fresh store through the public API: each sample becomes a user
with a persona whose labels are the two speakers' names, each session a conversation created at
the session's date, each turn a message at that date keeping its ``dia_id`` in metadata. Then
every question goes through ``hearth.retrieval.hybrid.search`` (the function behind the search
tools, the owner's search and archive recall) and the script reports the share of evidence turns
found in the top k, per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial), for 1-4 together and for all, beside a plain BM25 baseline from the same run.
Each search gets the persona's speaker names and ignored names exactly as archive recall and the
search tools pass them. ``--store DIR`` keeps the loaded and embedded store for quicker reruns.

Facts (E2) are written as the idle checkpoint writes them: the offline helper's rules over each
session's turns (``offline``), and the data set's own statements (``observation``, written by a
model from the turns, each naming its turn) standing in for what a model-backed helper would write
(``model``); each cites its turns. Configurations measured through the same ``search``: ``send`` is
archive recall on the send path with the offline facts (``tuning.SEND_PATH`` and the
``recall_budget_ms`` setting: the offline default), ``statements`` the same with the model-written
facts beside them, ``owner`` the owner's search and the tools (``tuning.DEFAULT``, no budget,
offline facts). ``both`` is send and owner. ``--folds`` adds leave-one-conversation-out
cross-validation (for every configuration but the owner's search when the send path runs too):
for each conversation, the setting of a small grid that does best on the other conversations is
chosen and the held-out conversation is scored with it; BM25 is reported for the same folds.
No cross-encoder reranker is measured: none ships in a PyPI package (docs/recall.md).
The send-path configurations are also scored with no budget at all, beside the budgeted figure,
with the count of searches whose budget dropped a step (S16); ``--overlap JOBS_PER_S`` runs the
budgeted searches under the send path's overlap load (the worker running, real jobs queued at that
rate), and ``--head-start-ms`` starts the budget's clock as early as a send's earlier layers do.
With ``--json`` the last line is one JSON object: {"configurations": {...}, "bm25": {...}, "questions": n}.
"""

from __future__ import annotations

import argparse
import json
import os
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
from hearth.memory.helpers import OfflineHelper  # noqa: E402
from hearth.memory.helpers.base import TurnText  # noqa: E402
from hearth.prompt.layers.keyword_recall import persona_names  # noqa: E402
from hearth.retrieval import facts as fact_store  # noqa: E402
from hearth.retrieval.hybrid import DEFAULT, SEND_PATH, Filters, Tuning, search  # noqa: E402
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


def write_facts(hearth: Hearth, sample: dict, user_id: int, dia: dict[int, str]) -> dict[str, int]:
    """The sample's facts, once per kept store: ``offline`` from the offline helper's rules over
    each session's turns (what the idle checkpoint writes without a provider), ``model`` from the
    data set's statements, each citing the turns it names. Returns facts per writer."""
    conn = hearth.store.connection()
    have = {r[0]: r[1] for r in conn.execute("SELECT source, count(*) FROM facts WHERE user_id = ? GROUP BY source",
                                             (user_id,))}
    message_of = {d: m for m, d in dia.items()}
    with hearth.store.write() as wconn:
        if not have.get("offline"):
            sessions: dict[int, list[TurnText]] = {}
            for r in conn.execute("SELECT id, conversation_id, role, content FROM messages WHERE user_id = ?"
                                  " AND kind = 'chat' ORDER BY id", (user_id,)):
                sessions.setdefault(r[1], []).append(TurnText(r[2], r[3], r[0]))
            for turns in sessions.values():
                for fact in OfflineHelper().extract_facts(turns):
                    fact_store.add(wconn, user_id, fact.text, fact.message_ids, source="offline")
        if not have.get("model"):
            for session in (sample.get("observation") or {}).values():
                for statements in session.values():
                    for text, cited in statements:
                        ids = [message_of[d] for d in evidence_ids(cited if isinstance(cited, list) else [cited])
                               if d in message_of]
                        if ids and str(text).strip():
                            fact_store.add(wconn, user_id, str(text)[:fact_store.FACT_MAX_CHARS], ids, source="model")
    return {r[0]: r[1] for r in conn.execute("SELECT source, count(*) FROM facts WHERE user_id = ? GROUP BY source",
                                             (user_id,))}


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


CONFIGURATIONS = ("send", "owner", "statements")
OFFLINE_FACTS = ("offline",)  # what a deployment without a provider has
MODEL_FACTS = ("offline", "model")  # with the data set's statements standing in for the model's


def configuration(name: str, settings: Settings, porter: bool = False) -> tuple[Tuning, float | None]:
    """(tuning, budget) of a configuration: ``send`` is archive recall's with offline facts,
    ``statements`` the same with the model-written facts too, ``owner`` the owner's search.
    With ``porter`` the index stems, so the query's words are asked as they are (no prefix terms)."""
    if name == "owner":
        tuning, budget = DEFAULT.with_changes(fact_origins=OFFLINE_FACTS), None
    else:
        tuning = SEND_PATH.with_changes(fact_origins=MODEL_FACTS if name == "statements" else OFFLINE_FACTS)
        budget = float(settings.recall_budget_ms)
    return (tuning.with_changes(stem_prefixes=False) if porter else tuning), budget


def use_porter(conn) -> None:
    """Rebuild the chat-turn keyword index with FTS5's porter tokenizer (the experiment beside the
    light prefix stemming the product ships); the triggers keep their names and carry on."""
    conn.executescript("""
        DROP TABLE messages_fts_vocab;
        DROP TABLE messages_fts;
        CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2');
        CREATE VIRTUAL TABLE messages_fts_vocab USING fts5vocab(messages_fts, 'row');
        INSERT INTO messages_fts (rowid, content) SELECT id, content FROM messages
            WHERE kind = 'chat' AND role IN ('user', 'assistant');
    """)


# Candidate settings for cross-validation: each fold picks the one that does best on the other
# conversations, and is scored on its own (held-out) conversation with it.
GRID: dict[str, dict] = {
    "as shipped": {},
    "rrf k 5": {"rrf_k": 5},
    "rrf k 20": {"rrf_k": 20},
    "no time lift": {"time_boost": 1.0},
    "conversation lift 0.3": {"session_weight": 0.3},
    "conversation lift 1.0": {"session_weight": 1.0},
    "keyword query per variant": {"keyword_one_pass": False},
    "load every candidate": {"load_limit": 0},
    "feedback reads every word": {"feedback_candidates": 0},
    "feedback reads 12 words": {"feedback_candidates": 12},
    "no feedback list": {"feedback_docs": 0},
    "no dated list": {"dated_weight": 0.0},
    "dated list 0.5": {"dated_weight": 0.5},
    "dated list 2.0": {"dated_weight": 2.0},
    "dated list 7 days after": {"dated_days_after": 7},
    "no question penalty": {"question_penalty": 0.0},
    "question penalty 0.3": {"question_penalty": 0.3},
    "question penalty 0.7": {"question_penalty": 0.7},
    "no fact lists": {"fact_keyword_weight": 0.0, "fact_vector_weight": 0.0},
    "fact keyword list 0": {"fact_keyword_weight": 0.0},
}
# The facts' weights (E2), for the configuration whose facts carry what the turns do not say.
FACT_GRID: dict[str, dict] = {
    "as shipped": {},
    "no fact lists": {"fact_keyword_weight": 0.0, "fact_vector_weight": 0.0},
    "fact keyword list 0": {"fact_keyword_weight": 0.0},
    "fact keyword list 0.5": {"fact_keyword_weight": 0.5},
    "fact vector list 0.5": {"fact_vector_weight": 0.5},
    "fact vector list 1.5": {"fact_vector_weight": 1.5},
    "fact floor at rank 30": {"fact_floor_rank": 30},
    "no fact floor": {"fact_floor_rank": 0},
    "no feedback list": {"feedback_docs": 0},
    "conversation lift 0.3": {"session_weight": 0.3},
}

Scores = dict[str, dict[str, dict[int, list[float]]]]  # sample -> category -> k -> recall per question


class Floor:
    """The primitives a hybrid search builds on, timed directly for each question just before its
    search (so both see the same moment of a shared machine): one query embedding straight from the
    model (not through the product's query cache), one FTS5 BM25 top-10 with the terms the product
    selects, one vector top-10 over the user's index."""

    def __init__(self, hearth: Hearth, embedder) -> None:
        self.hearth = hearth
        self.embedder = embedder
        self.samples: list[float] = []

    def measure(self, conn, user_id: int, question: str) -> None:
        from hearth.retrieval.keyword import match_query
        from hearth.retrieval.semantic import query_vectors, vector_search
        from hearth.retrieval.terms import select_terms

        started = time.perf_counter()
        words = select_terms(conn, terms(question)) or terms(question)[:3]
        if words:
            conn.execute("SELECT rowid, bm25(messages_fts) AS s FROM messages_fts WHERE messages_fts MATCH ?"
                         " ORDER BY s LIMIT 10", (match_query(words),)).fetchall()
        if self.embedder is not None:
            vector = query_vectors(self.embedder, [question])
            vector_search(conn, str(self.hearth.store.path), "messages", user_id, self.embedder, vector, 10)
        self.samples.append((time.perf_counter() - started) * 1000)


def evaluate(hearth: Hearth, loaded: list, embedder, tuning: Tuning, budget_ms: float | None,
             ks: list[int], timings: list[float] | None = None, floor: Floor | None = None,
             per_sample: dict[str, list[float]] | None = None, dropped: dict[str, int] | None = None,
             head_start_ms: float = 0.0) -> Scores:
    """R@k per sample and category. ``dropped`` counts the searches whose latency budget left an
    optional step out, by step (and ``searches``); ``head_start_ms`` starts the budget's clock that
    long before each search, as a send's layers before archive recall spend it."""
    conn = hearth.store.connection()
    top = max(ks)
    out: Scores = {}
    for sample, user_id, dia in loaded:
        scope = hearth.scope(user_id)
        persona = scope.personas.default()
        speakers = {persona.user_label[:-6]: "user", persona.assistant_label[:-6]: "assistant"}
        mine = out.setdefault(sample["sample_id"], {})
        for qa in sample["qa"]:
            gold = evidence_ids(qa.get("evidence"))
            if not gold:
                continue
            if floor is not None:
                floor.measure(conn, user_id, str(qa["question"]))
            started = time.perf_counter()
            outcome = search(conn, user_id, str(qa["question"]), filters=Filters(sources=("messages",)),
                             limit=top, embedder=embedder, db_key=str(hearth.store.path),
                             speaker_names=speakers, ignore_names=persona_names(persona), log=False,
                             tuning=tuning, budget_ms=budget_ms,
                             budget_started=time.monotonic() - head_start_ms / 1000)
            if dropped is not None:
                dropped["searches"] = dropped.get("searches", 0) + 1
                for step in outcome.skipped:
                    dropped[step] = dropped.get(step, 0) + 1
            if timings is not None:
                timings.append((time.perf_counter() - started) * 1000)
            if per_sample is not None:
                per_sample.setdefault(sample["sample_id"], []).append((time.perf_counter() - started) * 1000)
            found = [dia.get(r.id, "") for r in outcome.results]
            for k in ks:
                mine.setdefault(str(qa["category"]), {}).setdefault(k, []).append(recall_at(found, gold, k))
    return out


def bm25_scores(hearth: Hearth, loaded: list, ks: list[int]) -> Scores:
    conn = hearth.store.connection()
    out: Scores = {}
    for sample, user_id, dia in loaded:
        mine = out.setdefault(sample["sample_id"], {})
        for qa in sample["qa"]:
            gold = evidence_ids(qa.get("evidence"))
            if not gold:
                continue
            plain = search_messages(conn, user_id, terms(str(qa["question"])), limit=max(ks))
            base = [dia.get(h.message_id, "") for h in plain]
            for k in ks:
                mine.setdefault(str(qa["category"]), {}).setdefault(k, []).append(recall_at(base, gold, k))
    return out


def merged(scores: Scores, samples: list[str] | None = None) -> dict[str, dict[int, list[float]]]:
    out: dict[str, dict[int, list[float]]] = {}
    for sample, cats in scores.items():
        if samples is not None and sample not in samples:
            continue
        for cat, by_k in cats.items():
            for k, values in by_k.items():
                out.setdefault(cat, {}).setdefault(k, []).extend(values)
    return out


def r10(scores: Scores, samples: list[str], group: str = "1-4") -> float:
    return summarise(merged(scores, samples), [10])[group]["10"]


def cross_validate(grid_scores: dict[str, Scores], samples: list[str], bm25: Scores | None = None) -> list[dict]:
    """Leave one conversation out: choose the grid setting best on the others (R@10, 1-4), report
    the held-out conversation with it (and plain BM25's on the same conversation)."""
    folds = []
    for held in samples:
        rest = [s for s in samples if s != held]
        chosen = max(grid_scores, key=lambda name: (r10(grid_scores[name], rest), name == "as shipped"))
        shipped = grid_scores["as shipped"]
        folds.append({"held_out": held, "chosen": chosen, "train_r10_1_4": r10(grid_scores[chosen], rest),
                      "held_r10_1_4": r10(grid_scores[chosen], [held]),
                      "held_r10_all": r10(grid_scores[chosen], [held], "all"),
                      "shipped_held_r10_1_4": r10(shipped, [held]), "shipped_held_r10_all": r10(shipped, [held], "all"),
                      "questions": sum(len(v[10]) for v in merged(shipped, [held]).values())})
        if bm25 is not None:
            folds[-1]["bm25_held_r10_1_4"] = r10(bm25, [held])
    return folds


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 25, 50])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-vectors", action="store_true", help="keyword signals only (no embedding model)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N samples")
    parser.add_argument("--store", default="", help="keep the loaded store in this folder and reuse it on later runs")
    parser.add_argument("--config", choices=(*CONFIGURATIONS, "both"), nargs="+", default=["both"],
                        help="send: archive recall's tuning and latency budget with offline facts (the offline "
                             "default); statements: the same with the data set's statements as model-written "
                             "facts; owner: the owner's search; both: send and owner")
    parser.add_argument("--porter", action="store_true",
                        help="run on a copy of --store whose keyword index uses FTS5's porter tokenizer")
    parser.add_argument("--overlap", type=float, default=0.0, metavar="JOBS_PER_S",
                        help="while the budgeted configurations run, the worker runs and another thread queues this"
                             " many real background jobs a second (as send_path.py --overlap)")
    parser.add_argument("--head-start-ms", type=float, default=0.0,
                        help="start the budget's clock this long before each search, as a send's earlier layers"
                             " spend it (send_path.py --steps prints when archive recall starts)")
    parser.add_argument("--folds", action="store_true",
                        help="leave-one-conversation-out cross-validation over a small grid of settings")
    args = parser.parse_args(argv)
    ks = sorted(set(args.k) | {10})
    samples = json.loads(Path(args.data).read_text(encoding="utf-8"))
    if args.limit:
        samples = samples[:args.limit]
    started = time.monotonic()
    configs = list(dict.fromkeys(c for name in args.config
                                 for c in (("send", "owner") if name == "both" else (name,))))
    result: dict = {"configurations": {}, "tokenizer": "porter" if args.porter else "unicode61 with prefix stems"}
    with tempfile.TemporaryDirectory() as scratch:
        home = args.store or scratch
        if args.porter:
            import sqlite3

            if not args.store:
                parser.error("--porter needs a loaded --store to copy")
            home = str(Path(scratch) / "porter")
            Path(home).mkdir()
            source = sqlite3.connect(str(Path(args.store) / "hearth.db"))
            target = sqlite3.connect(str(Path(home) / "hearth.db"))
            source.backup(target)
            source.close()
            use_porter(target)
            target.commit()
            target.close()
        settings = Settings.resolve({"home": home}, environ={})
        with Hearth(settings) as hearth:
            loaded = [(s, *(reuse(hearth, s) or load(hearth, s))) for s in samples]
            embedder = None
            if not args.no_vectors:
                from hearth.retrieval import semantic

                embedder = semantic.shared_embedder(hearth)
                semantic.embed_pending(hearth.store, embedder)
                semantic.QUERY_CACHE_SIZE = 20_000  # the grid asks every question again
            log(f"loaded {sum(len(d) for _, _, d in loaded)} turns in {time.monotonic() - started:.1f}s")
            result["facts"] = {s["sample_id"]: write_facts(hearth, s, user_id, dia) for s, user_id, dia in loaded}
            if embedder is not None:
                semantic.embed_pending(hearth.store, embedder)  # the facts' vectors
            names = [s["sample_id"] for s in samples]
            bm25 = bm25_scores(hearth, loaded, ks)
            result["bm25"] = summarise(merged(bm25), ks)
            for config in configs:
                tuning, budget_ms = configuration(config, settings, args.porter)
                timings: list[float] = []
                floor = Floor(hearth, embedder)
                per_sample: dict[str, list[float]] = {}
                dropped: dict[str, int] = {}
                background = start_load(hearth, args.overlap) if args.overlap and budget_ms is not None else None
                try:
                    scores = evaluate(hearth, loaded, embedder, tuning, budget_ms, ks, timings, floor, per_sample,
                                      dropped, args.head_start_ms if budget_ms is not None else 0.0)
                finally:
                    overlap_report = stop_load(background)
                entry = {"recall": summarise(merged(scores), ks),
                         "per_conversation": {n: summarise(merged(scores, [n]), [10]) for n in names},
                         "search_ms": summary_ms(timings),
                         "search_ms_by_conversation": {n: summary_ms(v) for n, v in per_sample.items()},
                         "floor_ms": summary_ms(floor.samples),
                         "load_average": [round(x, 1) for x in os.getloadavg()]}
                if budget_ms is not None:
                    # The same searches with no budget: what the budget's dropped steps cost in recall.
                    unbudgeted = evaluate(hearth, loaded, embedder, tuning, None, [10])
                    entry["budget"] = {"budget_ms": budget_ms, "head_start_ms": args.head_start_ms,
                                       "load": overlap_report or "none: the searches ran alone",
                                       "searches": dropped.pop("searches", 0), "dropped": dropped,
                                       "r10_1_4": r10(scores, names), "unbudgeted_r10_1_4": r10(unbudgeted, names),
                                       "r10_all": r10(scores, names, "all"),
                                       "unbudgeted_r10_all": r10(unbudgeted, names, "all")}
                if floor.samples and timings:
                    entry["search_over_floor"] = round(entry["search_ms"]["median_ms"] / entry["floor_ms"]["median_ms"], 2)
                if args.folds and (config != "owner" or len(configs) == 1):
                    grid = {"as shipped": scores}
                    for label, changes in (FACT_GRID if config == "statements" else GRID).items():
                        if changes:
                            grid[label] = evaluate(hearth, loaded, embedder, tuning.with_changes(**changes),
                                                   budget_ms, [10])
                    entry["folds"] = cross_validate(grid, names, bm25)
                    entry["grid"] = {label: r10(g, names) for label, g in grid.items()}
                result["configurations"][config] = entry
    result["bm25_per_conversation"] = {n: summarise(merged(bm25, [n]), [10]) for n in names}
    result["questions"] = sum(len(v[10]) for v in merged(bm25).values())
    log(f"{result['questions']} questions in {time.monotonic() - started:.1f}s")
    print_result(result, ks)
    if args.json:
        print(json.dumps(result))
    return result


def start_load(hearth: Hearth, rate: float):
    """The send path's overlap load (send_path.py --overlap): the background worker running and
    real jobs queued at ``rate`` a second by another thread, for a user of its own."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import Overlap

    from hearth.ops.jobs import Worker

    try:
        user = hearth.users.by_name("locomo-load")
    except NotFound:
        user = hearth.users.create("locomo-load")
    scope = hearth.scope(user.id)
    persona = scope.personas.create("load", "Load") if not scope.personas.list() else scope.personas.default()
    worker = Worker(hearth)
    worker.start()
    return worker, Overlap(hearth, user.id, persona.id, rate, 11).start()


def stop_load(load) -> dict | None:
    if load is None:
        return None
    worker, overlap = load
    report = overlap.stop()
    worker.stop(timeout=300)
    return report


def summary_ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0}
    return {"n": len(ordered), "median_ms": round(ordered[len(ordered) // 2], 2),
            "p99_ms": round(ordered[round(0.99 * (len(ordered) - 1))], 2)}


def fold_mean(folds: list[dict]) -> float:
    """The mean of the held-out folds' R@10 (1-4), each fold counting once."""
    return sum(f["held_r10_1_4"] for f in folds) / len(folds) if folds else 0.0


def print_result(result: dict, ks: list[int]) -> None:
    if result.get("facts"):
        print("facts per conversation (writer: count): " + "; ".join(
            f"{n} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) for n, c in result["facts"].items()))
    for config, entry in result["configurations"].items():
        print(f"configuration: {config} (search median {entry['search_ms'].get('median_ms')} ms,"
              f" p99 {entry['search_ms'].get('p99_ms')} ms; floor median {entry['floor_ms'].get('median_ms')} ms,"
              f" p99 {entry['floor_ms'].get('p99_ms')} ms; search / floor {entry.get('search_over_floor')};"
              f" load average {entry['load_average']})")
        if "budget" in entry:
            b = entry["budget"]
            under = b["load"] if isinstance(b["load"], str) else (
                f"{b['load']['jobs_per_s']:g} background jobs/s queued, {b['load']['done']} done,"
                f" {b['load']['pending_at_end']} waiting at the end")
            steps = ", ".join(f"{step} {n}" for step, n in sorted(b["dropped"].items())) or "none"
            print(f"  under the send's budget ({b['budget_ms']:g} ms, clock started {b['head_start_ms']:g} ms before"
                  f" each search; load: {under}): R@10 1-4 {b['r10_1_4']:.4f} beside {b['unbudgeted_r10_1_4']:.4f}"
                  f" unbudgeted (all {b['r10_all']:.4f} / {b['unbudgeted_r10_all']:.4f}); of {b['searches']}"
                  f" searches the budget dropped: {steps}")
        for n, ms in entry["search_ms_by_conversation"].items():
            print(f"  {n}: search median {ms.get('median_ms')} ms, p99 {ms.get('p99_ms')} ms")
        print("category  " + "  ".join(f"R@{k:<5}" for k in ks) + "   | BM25 " + "  ".join(f"R@{k:<5}" for k in ks))
        for name in (*CATEGORIES, "1-4", "all"):
            row = "  ".join(f"{entry['recall'][name][str(k)]:<7.3f}" for k in ks)
            base = "  ".join(f"{result['bm25'][name][str(k)]:<7.3f}" for k in ks)
            print(f"{name:<9} {row}   |      {base}")
        for n, per in entry["per_conversation"].items():
            print(f"  {n}: R@10 1-4 {per['1-4']['10']:.3f}, all {per['all']['10']:.3f}")
        if "grid" in entry:
            print("  the grid, R@10 1-4 over every conversation: " + "; ".join(
                f"{label} {value:.4f}" for label, value in entry["grid"].items()))
        if "folds" in entry:
            print("  leave one conversation out (setting chosen on the others; held-out R@10):")
            for f in entry["folds"]:
                print(f"  {f['held_out']:<10} chose {f['chosen']!r:<24} train {f['train_r10_1_4']:.3f}"
                      f"  held-out 1-4 {f['held_r10_1_4']:.3f} all {f['held_r10_all']:.3f}"
                      f"  (as shipped {f['shipped_held_r10_1_4']:.3f} / {f['shipped_held_r10_all']:.3f},"
                      f" {f['questions']} questions; BM25 {f.get('bm25_held_r10_1_4', 0):.3f})")
            print(f"  mean of the held-out folds, R@10 1-4: {fold_mean(entry['folds']):.3f}; lowest"
                  f" {min(f['held_r10_1_4'] for f in entry['folds']):.3f}")


def log(message: str) -> None:
    print(message, file=sys.stderr)


if __name__ == "__main__":
    main()
