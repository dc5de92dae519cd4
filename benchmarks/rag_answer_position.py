"""Where on its page each eval question's answer sits: is it the page's first chunk?

    nice -n 10 python benchmarks/rag_answer_position.py [benchmarks/data/rag_questions.json] \
        [--pdfs DIR] [--no-search]

Questions written by reading the top of a page make an eval that rewards signals of a
page's top (rag_rerank_study.py's page-position controls won there). Two measures:
- `evidence`: a question may carry a verbatim passage of its page that answers it (spaces
  may differ). It is looked up in the page as the default extractor reads it and cut into
  chunks as ingest cuts it (rag.chunking with the index's chunk size and overlap): is it
  whole inside the page's first chunk, and where does it start ("top": in the first chunk,
  "end": in the page's last third of characters, else "mid")? A question labelled with
  `position` must agree, and a "mid" or "end" one must not sit in the first chunk.
- `best_chunk_is_first`, for every question, with or without evidence: the default search's
  best chunk of the right page (search with no limit of chunks per page, all chunks
  ranked) is that page's first chunk. The same for the wrong pages among the best 10
  pages. Needs the eval collection (rag_eval.py builds it in the same --home; ingest here
  is a no-op when unchanged); --no-search checks the evidence alone.
Writes benchmarks/results/rag_answer_position.json: per question and per group (questions
labelled "mid"/"end", and unlabelled). Exits 1 when a labelled question fails its check.
"""
from __future__ import annotations

import json
import os
import re
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.provenance import save  # noqa: E402
from benchmarks.rag_eval import default_documents, study_arguments  # noqa: E402
from rag import extract  # noqa: E402
from rag.chunking import chunk_pages  # noqa: E402

END_SHARE = 2 / 3     # evidence starting past this share of the page's characters is "end"
TOP_PAGES = 10


def evidence_place(text: str, spans: list[tuple[int, int]], evidence: str) -> dict | None:
    """Where `evidence` (spaces and line breaks ignored) sits in a page of `text` cut into chunk
    character `spans` (page order): the chunks that hold it whole, and its position; None
    when the page does not hold it."""
    m = re.search(r"\s+".join(map(re.escape, evidence.split())), text)
    if m is None:
        return None
    holding = [i for i, (a, b) in enumerate(spans) if a <= m.start() and m.end() <= b]
    first = 0 in holding
    return {"chunks": holding, "in_first_chunk": first, "start_share": round(m.start() / len(text), 3),
            "position": "top" if first else "end" if m.start() >= END_SHARE * len(text) else "mid"}


def chunk_number(hit) -> int:
    """The chunk's place in its document (rag.index names a chunk content-hash-number)."""
    return int(hit.chunk_id.rsplit("-", 1)[1])


def best_chunks(hits, first_chunk: dict) -> list[tuple[tuple, bool]]:
    """(source, page) of each page in the order search ranks its best chunk, and whether that
    chunk is the page's first."""
    seen, out = set(), []
    for h in hits:
        key = (Path(h.source).name, h.page)
        if key not in seen:
            seen.add(key)
            out.append((key, chunk_number(h) == first_chunk[(h.source, h.page)]))
    return out


def share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


def main() -> int:
    p = study_arguments(__doc__.splitlines()[0], "rag_answer_position.json")
    p.add_argument("--no-search", action="store_true", help="check the evidence only (no embedding model run)")
    args = p.parse_args()

    spec, index, docs = default_documents(args.questions, args.home, args.pdfs)
    questions = spec["questions"]
    spans, first_chunk, texts = {}, {}, {}
    cut = 0
    for doc in docs:
        for c in chunk_pages(doc.pages, index.embedder.offsets, index.chunk_tokens, index.chunk_overlap):
            spans.setdefault((Path(doc.source).name, c.page), []).append((c.start, c.end))
            first_chunk.setdefault((doc.source, c.page), c.index)
            cut += 1
        texts.update({(Path(doc.source).name, pg.number): pg.text for pg in doc.pages})

    rows, failures = [], []
    for q in questions:
        row = {"question": q["question"], "source": q["source"], "pages": q["pages"], "label": q.get("position")}
        if "evidence" in q:
            places = [{"page": pg, **pl} for pg in q["pages"]
                      if (pl := evidence_place(texts[(q["source"], pg)], spans[(q["source"], pg)], q["evidence"]))]
            place = places[0] if places else None
            row["evidence"] = place
            wrong = ("evidence not on its pages" if place is None
                     else "answer in the first chunk" if place["in_first_chunk"] and row["label"] in ("mid", "end")
                     else f"labelled {row['label']}, found {place['position']}"
                     if row["label"] and row["label"] != place["position"]
                     else None)
            if wrong:
                failures.append(f"{q['source']} {q['pages']}: {q['question']}: {wrong}")
        elif row["label"]:
            failures.append(f"{q['source']} {q['pages']}: {q['question']}: a position label without evidence")
        rows.append(row)

    if not args.no_search:
        collection = f"eval-{extract.DEFAULT}"
        index.ingest_many(docs, collection)
        corpus = index.corpus(collection)
        assert corpus.count == cut, (corpus.count, cut)    # the store's chunks are the ones cut here
        defaults = index.settings
        index.settings = replace(defaults, per_page=0)
        for q, row in zip(questions, rows):
            hits = index.search(q["question"], collection, k=corpus.count)
            pages = best_chunks(hits, first_chunk)
            right = {(q["source"], pg) for pg in q["pages"]}
            row["best_chunk_is_first"] = next(first for key, first in pages if key in right)
            row["wrong_pages_best_chunk_is_first"] = [first for key, first in pages[:TOP_PAGES] if key not in right]
            if row.get("evidence"):
                best = next(h for h in hits if (Path(h.source).name, h.page) in right)
                on_page = chunk_number(best) - first_chunk[(best.source, best.page)]
                row["best_chunk_holds_evidence"] = best.page == row["evidence"]["page"] and on_page in row["evidence"]["chunks"]
        index.settings = defaults

    groups = defaultdict(list)
    for row in rows:
        groups[row["label"] or "unlabelled"].append(row)
        if row["label"] in ("mid", "end"):
            groups["mid+end"].append(row)
    groups["all"] = rows
    summary = {}
    for name, group in groups.items():
        s = {"questions": len(group),
             "evidence_in_first_chunk": share([r["evidence"]["in_first_chunk"] for r in group if r.get("evidence")])}
        if not args.no_search:
            s.update(right_pages_best_chunk_is_first=share([r["best_chunk_is_first"] for r in group]),
                     wrong_pages_in_top_10_best_chunk_is_first=share(
                         [f for r in group for f in r["wrong_pages_best_chunk_is_first"]]),
                     best_chunk_holds_evidence=share([r["best_chunk_holds_evidence"] for r in group
                                                      if "best_chunk_holds_evidence" in r]))
        summary[name] = s
        print(f"{name:12s} {json.dumps(s)}", file=sys.stderr)
    for f in failures:
        print("FAIL", f, file=sys.stderr)
    save({"benchmark": "rag_answer_position", "questions_file": args.questions.name, "questions": len(questions),
          "extractor": extract.DEFAULT, "chunk_tokens": index.chunk_tokens, "chunk_overlap": index.chunk_overlap,
          "end_share": round(END_SHARE, 3), "summary": summary, "failures": failures, "per_question": rows},
         args.out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
