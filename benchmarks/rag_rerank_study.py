"""Can a cheap rerank stage after the default search help on every PDF of the eval?

    nice -n 10 python benchmarks/rag_rerank_study.py [benchmarks/data/rag_questions.json] \
        [--pdfs DIR] [--top 20] [--no-embedding]

Reads the default extractor's eval collection (benchmarks/rag_eval.py builds it in the same
--home; here the same documents are ingested again, a no-op when unchanged), checks that its
own ranking reproduces RagIndex.search with the default settings less the phrase bonus
(convex fusion alone: the baseline here) and, with it, the default search, for every
question, then reranks the best
--top fused candidates with `fused + weight * signal` for each signal of
benchmarks/rerank_signals.py at each weight of WEIGHTS. The questions are split per PDF
into a tuning half (1st, 3rd, ... question of each PDF) and a held-out half: each
signal's weight is chosen on the tuning half alone (the best tuning MRR@10 among weights
that lower no PDF's R@1, R@5 or MRR@10 there, else the best tuning MRR@10, marked), then
scored on the held-out half and on all questions, per PDF, against the default. Also: a
linear mix of every signal fitted pairwise (RankNet-style logistic loss on right-minus-wrong
candidate pairs) on one half and scored on the other, both ways; search's own "prf" and
the "embedding" reranker through RagIndex.search. Signals in CONTROLS read where a chunk
sits on its page: they measure how the questions were written (`position_bias`: how often
the right page's best chunk is its first, against wrong pages and all chunks) and are
never candidates for search. Writes benchmarks/results/rag_rerank_study.json.
"""
from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.provenance import save  # noqa: E402
from benchmarks.rag_eval import KS, default_documents, scores, study_arguments  # noqa: E402
from benchmarks.rerank_signals import Layout, signals  # noqa: E402
from rag import extract  # noqa: E402
from rag.index import PRF, _per_page  # noqa: E402

WEIGHTS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5)
METRICS = ("recall@1", "recall@5", "mrr@10")
CONTROLS = ("page_start", "previous_page_end")


def rank(order: list[int], metas: list[dict], q: dict) -> int | None:
    return next((r for r, i in enumerate(order, 1) if Path(metas[i]["source"]).name == q["source"]
                 and metas[i].get("page") in q["pages"]), None)


def table(ranks: list, questions: list[dict], picked: list[int]) -> dict:
    """Overall and per-PDF scores over the questions numbered in `picked`."""
    out = {"all": scores([ranks[i] for i in picked])}
    for src in sorted({questions[i]["source"] for i in picked}):
        out[src] = scores([ranks[i] for i in picked if questions[i]["source"] == src])
    return out


def delta(a: dict, base: dict) -> dict:
    return {k: {m: round(a[k][m] - base[k][m], 4) for m in METRICS} for k in a}


def harmless(d: dict) -> bool:
    """No PDF lost R@1, R@5 or MRR@10."""
    return all(v[m] >= 0 for k, v in d.items() if k != "all" for m in METRICS)


def pairwise_fit(features: list[np.ndarray], labels: list[np.ndarray], l2: float = 1.0, steps: int = 3000) -> np.ndarray:
    """Weights of a linear score fitted with logistic loss on (right - wrong) candidate pairs."""
    d = features[0].shape[1]
    diffs = np.concatenate([(x[y][:, None, :] - x[~y][None, :, :]).reshape(-1, d)
                            for x, y in zip(features, labels) if y.any()])
    w = np.zeros(diffs.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(diffs @ w)))
        w -= 0.5 * (-(diffs.T @ (1 - p)) / len(diffs) + l2 * w / len(diffs))
    return w


def main() -> int:
    p = study_arguments(__doc__.splitlines()[0], "rag_rerank_study.json")
    p.add_argument("--top", type=int, default=20, help="fused candidates a signal may reorder")
    p.add_argument("--no-embedding", action="store_true", help="skip the embedding reranker (seconds a query)")
    args = p.parse_args()

    spec, index, docs = default_documents(args.questions, args.home, args.pdfs)
    questions = spec["questions"]
    collection = f"eval-{extract.DEFAULT}"
    index.ingest_many(docs, collection)
    defaults = index.settings
    index.settings = s = replace(defaults, phrase_weight=0.0)
    corpus = index.corpus(collection)
    layout = Layout.build(corpus)
    k = max(KS)

    def order_of(score: np.ndarray) -> list[int]:
        return _per_page(np.argsort(-score, kind="stable"), corpus.metas, s.per_page, k)

    by_pdf = defaultdict(list)
    for i, q in enumerate(questions):
        by_pdf[q["source"]].append(i)
    tune = sorted(i for ids in by_pdf.values() for i in ids[0::2])
    held = sorted(i for ids in by_pdf.values() for i in ids[1::2])
    everyone = list(range(len(questions)))

    per_query, base_ranks, signal_ms = [], [], defaultdict(list)
    for q in questions:
        hits = index.search(q["question"], collection, k=k)
        vector = index.embedder.embed([q["question"]])[0]
        fused = index._fuse(corpus, "hybrid", s.fusion, corpus.cosine(vector), corpus.bm25.scores(q["question"]), k)
        order = order_of(fused)
        assert [corpus.ids[i] for i in order] == [h.chunk_id for h in hits], q["question"]   # the harness is search
        candidates = np.argsort(-fused, kind="stable")[:args.top]
        t0 = time.perf_counter()
        sig = signals(corpus, layout, q["question"], vector, fused, candidates)
        signal_ms["all signals"].append(1000 * (time.perf_counter() - t0))
        per_query.append((fused, candidates, sig))
        base_ranks.append(rank(order, corpus.metas, q))
        index.settings = defaults
        with_phrase = [h.chunk_id for h in index.search(q["question"], collection, k=k)]
        index.settings = s
        bonus = fused.copy()
        bonus[candidates] += defaults.phrase_weight * sig["query_run"][candidates]
        assert with_phrase == [corpus.ids[i] for i in order_of(bonus)], q["question"]   # and the default's bonus

    def reranked(score_of) -> list:
        out = []
        for q, (fused, candidates, sig) in zip(questions, per_query):
            score = fused - 10.0          # below every candidate: only the candidates move
            score[candidates] = score_of(fused, candidates, sig)
            out.append(rank(order_of(score), corpus.metas, q))
        return out

    base = {name: table(base_ranks, questions, picked) for name, picked in
            (("tune", tune), ("held_out", held), ("all", everyone))}
    records = [{"setting": "baseline: hybrid convex without the phrase bonus (the previous default)", "weight": None, **base}]

    def record(name: str, ranks: list, **extra) -> dict:
        got = {part: table(ranks, questions, picked) for part, picked in
               (("tune", tune), ("held_out", held), ("all", everyone))}
        d = {part: delta(got[part], base[part]) for part in got}
        rec = {"setting": name, **extra, **got, "delta": d,
               "harmless_on_tune": harmless(d["tune"]), "harmless_on_held_out": harmless(d["held_out"]),
               "harmless_on_all": harmless(d["all"]),
               "helps_every_pdf": harmless(d["all"]) and all(v["mrr@10"] > 0 for key, v in d["all"].items() if key != "all")}
        print(f"{name:40s} MRR tune {d['tune']['all']['mrr@10']:+.3f} held-out {d['held_out']['all']['mrr@10']:+.3f} "
              f"all {d['all']['all']['mrr@10']:+.3f}  worst PDF MRR (all) "
              f"{min(v['mrr@10'] for key, v in d['all'].items() if key != 'all'):+.3f}  "
              f"harmless tune/held-out/all {rec['harmless_on_tune']}/{rec['harmless_on_held_out']}/{rec['harmless_on_all']}",
              file=sys.stderr)
        return rec

    starts = per_query[0][2]["page_start"] > 0
    right, wrong = [], []
    for q, (fused, _, _) in zip(questions, per_query):
        for i in order_of(fused):
            (right if rank([i], corpus.metas, q) == 1 else wrong).append(bool(starts[i]))
    position_bias = {"right_pages_best_chunk_is_first": round(float(np.mean(right)), 3), "right_pages": len(right),
                     "wrong_pages_in_top_10_best_chunk_is_first": round(float(np.mean(wrong)), 3),
                     "wrong_pages": len(wrong), "chunks_that_are_first_on_their_page": round(float(starts.mean()), 3)}
    print("position bias", position_bias, file=sys.stderr)

    names = [n for n in per_query[0][2] if n not in CONTROLS]
    for name in [*names, *CONTROLS]:
        tried = {w: reranked(lambda f, c, sig, w=w, name=name: f[c] + w * sig[name][c]) for w in WEIGHTS}
        tuned = {w: delta(table(r, questions, tune), base["tune"]) for w, r in tried.items()}
        safe = [w for w in WEIGHTS if harmless(tuned[w])]
        pick = max(safe or WEIGHTS, key=lambda w: (tuned[w]["all"]["mrr@10"], -w))
        records.append(record(f"fused + w * {name}", tried[pick], weight=pick, weight_harmless_on_tune=bool(safe),
                              tune_mrr_delta_by_weight={str(w): tuned[w]["all"]["mrr@10"] for w in WEIGHTS},
                              **({"control": "reads the chunk's place on its page: how the questions were "
                                             "written, not evidence for search"} if name in CONTROLS else {}),
                              **({"default_weight": defaults.phrase_weight} if name == "query_run" else {})))

    def features(i: int) -> tuple[np.ndarray, np.ndarray]:
        fused, candidates, sig = per_query[i]
        x = np.stack([fused[candidates]] + [sig[n][candidates] for n in names], 1)
        x = x - np.r_[fused[candidates].max(), np.zeros(len(names))]
        y = np.array([rank([c], corpus.metas, questions[i]) == 1 for c in candidates])
        return x, y

    fitted, mixed = {}, [None] * len(questions)
    for train, test, tag in ((tune, held, "fitted on tune"), (held, tune, "fitted on held_out")):
        w = pairwise_fit(*zip(*(features(i) for i in train)))
        fitted[tag] = dict(zip(["fused", *names], np.round(w / w[0], 4).tolist()))
        ranks = reranked(lambda f, c, sig, w=w: np.stack([f[c]] + [sig[n][c] for n in names], 1) @ w)
        for i in test:
            mixed[i] = ranks[i]
    records.append(record("pairwise linear mix of all signals (2-fold: each half scored by the other's fit)",
                          mixed, weights_relative_to_fused=fitted))

    for name, rerank in (("search's prf", PRF), ("embedding reranker", "embedding")):
        if rerank == "embedding" and args.no_embedding:
            continue
        ranks, ms = [], []
        for q in questions:
            t0 = time.perf_counter()
            hits = index.search(q["question"], collection, k=k, rerank=rerank)
            ms.append(1000 * (time.perf_counter() - t0))
            ranks.append(next((r for r, h in enumerate(hits, 1) if Path(h.source).name == q["source"]
                               and h.page in q["pages"]), None))
        records.append(record(name, ranks, search_ms_median=round(float(np.median(ms)), 1)))

    report = {"benchmark": "rag_rerank_study", "questions_file": str(args.questions.name), "questions": len(questions),
              "collection": collection, "chunks": corpus.count, "top": args.top, "weights": WEIGHTS,
              "split": "per PDF: questions 1, 3, 5, ... tune the weight; 2, 4, 6, ... are held out",
              "signals_ms_median_per_query": round(float(np.median(signal_ms["all signals"])), 1),
              "position_bias": position_bias,
              "records": records, "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]}
    save(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
