"""Precision and recall of duplicate and contradiction detection among memories (B3).

    python benchmarks/duplicates.py [--no-embedder]

The labelled set is benchmarks/data/memory_quads.tsv: 60 hand-written facts, each with a
paraphrase (the same fact in other words), a contradiction (same subject, another value) and a
related but distinct fact. Each quad gives five labelled pairs, 300 in all:

    (fact, paraphrase) duplicate        (fact, contradiction) contradiction
    (fact, related) distinct            (paraphrase, related) distinct      (contradiction, related) distinct

Quads with an even line number are the tuning half, odd ones the test half (whole quads, so no fact
is seen on both sides). The thresholds are chosen on the tuning half only (best F1 for
duplicates) and every figure printed for the test half uses them unchanged.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from hearth.memory.duplicates import compare, contradicts, lexical_similarity

DATA = Path(__file__).parent / "data" / "memory_quads.tsv"


def load() -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    tune, test = [], []
    lines = [line for line in DATA.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    for i, line in enumerate(lines):
        fact, para, contra, related = line.split("\t")
        pairs = [(fact, para, "duplicate"), (fact, contra, "contradiction"), (fact, related, "distinct"),
                 (para, related, "distinct"), (contra, related, "distinct")]
        (tune if i % 2 == 0 else test).extend(pairs)
    return tune, test


def scores(pairs, predicted, wanted):
    tp = sum(1 for (_, _, label), p in zip(pairs, predicted) if p == wanted and label == wanted)
    fp = sum(1 for (_, _, label), p in zip(pairs, predicted) if p == wanted and label != wanted)
    fn = sum(1 for (_, _, label), p in zip(pairs, predicted) if p != wanted and label == wanted)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def predict(pairs, cosines, lexical, embedding):
    out = []
    for (a, b, _), cosine in zip(pairs, cosines):
        verdict = compare(a, b, cosine, lexical_threshold=lexical, embedding_threshold=embedding)
        out.append(verdict[0] if verdict else "distinct")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-embedder", action="store_true", help="lexical rules only")
    args = parser.parse_args()
    tune, test = load()
    print(f"labelled pairs: {len(tune) + len(test)} ({len(tune)} tuning, {len(test)} test)")

    def cosines_for(pairs):
        if args.no_embedder:
            return [None] * len(pairs)
        from hearth.retrieval.embedder import LocalEmbedder

        embedder = LocalEmbedder()
        a = np.asarray(embedder.embed([p[0] for p in pairs]), dtype="float32")
        b = np.asarray(embedder.embed([p[1] for p in pairs]), dtype="float32")
        return [float(x) for x in (a * b).sum(axis=1)]

    tune_cos, test_cos = cosines_for(tune), cosines_for(test)
    best = (-1.0, 0.0, 0.0)
    for lexical in np.arange(0.30, 0.96, 0.05):
        for embedding in (np.arange(0.60, 0.99, 0.02) if not args.no_embedder else [2.0]):
            f1 = scores(tune, predict(tune, tune_cos, lexical, embedding), "duplicate")[2]
            if f1 > best[0] + 1e-9:
                best = (f1, float(lexical), float(embedding))
    _, lexical, embedding = best
    print(f"tuned on the tuning half: lexical threshold {lexical:.2f}"
          + ("" if args.no_embedder else f", embedding threshold {embedding:.2f}"))

    def row(name, pairs, predicted, wanted):
        p, r, f = scores(pairs, predicted, wanted)
        print(f"  {name:<44} precision {p:.3f}  recall {r:.3f}  F1 {f:.3f}")

    print("test half (thresholds above, unchanged):")
    row("duplicates, lexical only", test, predict(test, [None] * len(test), lexical, 2.0), "duplicate")
    if not args.no_embedder:
        only_embedding = ["duplicate" if c is not None and c >= embedding else "distinct" for c in test_cos]
        row("duplicates, embedding only", test, only_embedding, "duplicate")
        row("duplicates, lexical or embedding (shipped)", test, predict(test, test_cos, lexical, embedding),
            "duplicate")
    row("contradictions, offline rules", test, ["contradiction" if contradicts(a, b) else "distinct"
                                                 for a, b, _ in test], "contradiction")
    flagged = predict(test, test_cos, lexical, embedding)
    any_p, any_r, any_f = scores([(a, b, "conflict" if label != "distinct" else "distinct") for a, b, label in test],
                                 ["conflict" if f != "distinct" else "distinct" for f in flagged], "conflict")
    print(f"  {'sent to review (duplicate or contradiction)':<44} precision {any_p:.3f}  recall {any_r:.3f}  F1 {any_f:.3f}")
    floor = [lexical_similarity(a, b) >= 0.999 for a, b, _ in test]
    row("floor: exact same words only", test, ["duplicate" if f else "distinct" for f in floor], "duplicate")


if __name__ == "__main__":
    main()
