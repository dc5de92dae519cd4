"""Retrieval quality over real PDFs, per extractor and per retrieval setting.

    nice -n 10 python benchmarks/rag_eval.py [benchmarks/data/rag_questions.json] \
        [--extractors pdftotext,pypdf] [--subset-extractors pdfium,pdfminer --subset a.pdf,b.pdf] \
        [--pdfs DIR] [--settings query-phrase] [--chunkings 192/48] [--context-embedding] \
        [--llm-rerank-url http://127.0.0.1:8011 --llm-rerank-top 10]

The PDFs come from Debian documentation packages (the question file names package and
member): read from their installed path when present, else from the cache folder (--pdfs,
default HOME/pdfs: DIR/package/name or DIR/name), else fetched with `apt-get download` and
unpacked with `dpkg -x` under the cache folder. Without apt (not Debian) the script
says so and exits 2. Every extractor's text of every PDF, read by rag.pdf.read_pdf as ingest
reads it (running heads dropped, outline headings attached), is measured (pages/s, glue rate:
the share of letters in 20+-letter "words") and ingested into a collection of its own,
all PDFs together (extractors named in --subset-extractors: only the --subset PDFs, to
spare embedding time on PDFs where all extractors give the same words); the default
extractor's collection is then searched with every retrieval setting, the others with
the default setting and plain vector search. With --chunkings (192/48,128/64: chunk tokens/overlap)
the default extractor's text is also cut at each size into a collection of its own and searched
with the default setting; with --context-embedding its chunks are also embedded under their
document's title (the PDF's own, else its file name) and heading path (RagIndex
context_prefix) into a collection searched with the default setting. A hit counts when
its file name equals the question's source and its page is one of `pages`; a hard negative counts when one of its pages ranks above the
first right hit. Writes benchmarks/results/rag_eval.json: one record per (extractor,
setting, chunking) with recall@1/3/5/10, MRR@10, search latency, and the same per PDF and per answer
position (`per_position`: the questions labelled "mid" or "end" of their page, and the
unmarked ones); the record of the default extractor and settings carries "default": true.

With --llm-rerank-url, the default extractor's collection is also searched with the default
setting whose best --llm-rerank-top hits (a record for each number given) are reranked by
rag.rerank_llm (the runtime's chat model, P(yes) per candidate, all candidates of a query
sent at once); its record names the model, the runtime's backend and the device, and its
latency includes the model's.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.provenance import save  # noqa: E402

from rag import extract  # noqa: E402
from rag.budget import Budget  # noqa: E402
from rag.index import PRF  # noqa: E402
from rag.pdf import glue_rate, pdf_title, read_pdf  # noqa: E402
from rag.types import Document  # noqa: E402
from worker.services import Services  # noqa: E402
from worker.settings import WorkerSettings  # noqa: E402

KS = (1, 3, 5, 10)


def fetch(doc: dict, cache: Path) -> Path:
    """The PDF of one question-file document: installed, cached (cache/package/name or
    cache/name), or fetched from Debian into the cache."""
    name = Path(doc["member"]).name.removesuffix(".gz")
    out = cache / doc["debian_package"] / name
    for found in (Path(doc["path"]), out, cache / name):
        if found.is_file():
            return found
    if not shutil.which("apt-get") or not shutil.which("dpkg"):
        sys.exit(f"{doc['path']} is missing and this is no Debian system: install the package "
                 f"{doc['debian_package']} or copy the file there")
    work = cache / doc["debian_package"] / "deb"
    work.mkdir(parents=True, exist_ok=True)
    got = subprocess.run(["apt-get", "download", doc["debian_package"]], cwd=work, capture_output=True, text=True)
    if got.returncode != 0:
        sys.exit(f"apt-get download {doc['debian_package']} failed ({got.stderr.strip()[:300]}); "
                 "run `apt-get update` first, or install the package")
    deb = next(work.glob("*.deb"))
    subprocess.run(["dpkg", "-x", str(deb), str(work / "root")], check=True)
    member = work / "root" / doc["member"]
    data = member.read_bytes()
    out.write_bytes(gzip.decompress(data) if member.suffix == ".gz" else data)
    return out


def read(path: Path, extractor: str) -> tuple[Document, float, float]:
    """The document as this extractor reads it, its glue rate, and the pages it read a second."""
    data = path.read_bytes()
    t0 = time.perf_counter()
    pages = tuple(read_pdf(data, path.name, Budget(seconds=3600), extractor))
    seconds = time.perf_counter() - t0
    texts = [p.text for p in pages]
    doc = Document(str(path), "pdf", pages, hashlib.sha256(data).hexdigest(), pdf_title(data, path.name))
    return doc, glue_rate(texts), len(texts) / seconds


def study_arguments(description: str, out: str) -> argparse.ArgumentParser:
    """A parser holding what the studies beside this eval share: the question file, the eval's
    --home, --pdfs, and --out (default benchmarks/results/OUT)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("questions", type=Path, nargs="?", default=ROOT / "benchmarks" / "data" / "rag_questions.json")
    p.add_argument("--home", type=Path, default=ROOT / ".samevm" / "rag_eval")
    p.add_argument("--pdfs", type=Path, help="folder of the PDFs (package/name or name; default HOME/pdfs)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / out)
    return p


def default_documents(questions_file: Path, home: Path, pdfs: Path | None):
    """The question file, a RagIndex over the eval's store in `home` (torch on one thread) and
    the file's documents as the default extractor reads them: what the studies beside this
    eval start from."""
    import torch
    torch.set_num_threads(1)
    spec = json.loads(questions_file.read_text())
    index = Services(WorkerSettings(home=home)).rag
    return spec, index, [read(fetch(d, pdfs or home / "pdfs"), extract.DEFAULT)[0] for d in spec["documents"]]


def scores(ranks: list[int | None]) -> dict:
    n = len(ranks)
    return {**{f"recall@{k}": round(sum(r is not None and r <= k for r in ranks) / n, 4) for k in KS},
            "mrr@10": round(sum(1 / r for r in ranks if r and r <= 10) / n, 4), "questions": n}


def evaluate(index, questions, collection, mode, rerank, fusion) -> dict:
    ranks, beaten, seconds = [], 0, []
    for q in questions:
        t0 = time.perf_counter()
        hits = index.search(q["question"], collection, k=max(KS), mode=mode, rerank=rerank, fusion=fusion)
        seconds.append(time.perf_counter() - t0)
        where = [(Path(h.source).name, h.page) for h in hits]
        rank = next((i for i, (src, page) in enumerate(where, 1) if src == q["source"] and page in q["pages"]), None)
        ranks.append(rank)
        negatives = {(n["source"], p) for n in q.get("hard_negatives", []) for p in n["pages"]}
        beaten += any(w in negatives for w in where[:(rank or len(where) + 1) - 1])
    seconds.sort()
    per_pdf = {}
    for src in sorted({q["source"] for q in questions}):
        per_pdf[src] = scores([r for r, q in zip(ranks, questions) if q["source"] == src])
    per_position = {}
    for where in sorted({q.get("position", "unmarked") for q in questions}):
        per_position[where] = scores([r for r, q in zip(ranks, questions) if q.get("position", "unmarked") == where])
    if {"mid", "end"} & per_position.keys():
        per_position["mid+end"] = scores([r for r, q in zip(ranks, questions) if q.get("position") in ("mid", "end")])
    with_neg = sum(1 for q in questions if q.get("hard_negatives"))
    return {**scores(ranks), "hard_negative_above_answer": f"{beaten}/{with_neg}",
            "search_ms_median": round(1000 * seconds[len(seconds) // 2], 1),
            "search_ms_p95": round(1000 * seconds[int(0.95 * (len(seconds) - 1))], 1),
            "per_pdf": per_pdf, "per_position": per_position, "ranks": ranks}


OLD = {"per_page": 0}    # before: no limit of chunks per page in a result list
SETTINGS = [   # (name, mode, rerank, fusion, SearchSettings changes)
    ("vector", "vector", None, None, OLD),
    ("bm25", "bm25", None, None, OLD),
    ("hybrid rrf", "hybrid", None, "rrf", OLD),
    ("the old default: hybrid rrf + embedding rerank", "hybrid", "embedding", "rrf", OLD),
    *[(f"hybrid convex alpha={a}", "hybrid", None, "convex", {"alpha": a}) for a in (0.5, 0.6, 0.65, 0.7, 0.75, 0.8)],
    ("hybrid convex, chunks of a page not limited", "hybrid", None, "convex", OLD),
    *[(f"hybrid convex + prf weight={w} top={t}", "hybrid", PRF, "convex", {"prf_weight": w, "prf_top": t})
      for w in (0.3, 0.5) for t in (3, 5)],
    ("hybrid convex + embedding rerank", "hybrid", "embedding", "convex", {}),
    ("hybrid convex, contents pages not lowered", "hybrid", None, "convex", {"contents_penalty": 0.0}),
    ("hybrid convex, contents pages lowered by 0.2", "hybrid", None, "convex", {"contents_penalty": 0.2}),
    ("hybrid convex, BM25 without section headings", "hybrid", None, "convex", {"section_keywords": False}),
    ("hybrid convex, neither (the previous default)", "hybrid", None, "convex",
     {"section_keywords": False, "contents_penalty": 0.0}),
    ("hybrid convex, BM25 k1=1.5 b=0.75 (bm25s' defaults, the previous default)", "hybrid", None, "convex",
     {"bm25_k1": 1.5, "bm25_b": 0.75}),
    ("hybrid convex without the query-phrase bonus (the previous default)", "hybrid", None, "convex",
     {"phrase_weight": 0.0}),
    *[(f"hybrid convex + page evidence share={w}", "hybrid", None, "convex", {"page_share": w}) for w in (0.1, 0.3)],
    *[(f"hybrid convex, cosine less hubness x{w}", "hybrid", None, "convex", {"hub_weight": w}) for w in (0.3, 0.4, 0.5)],
]
DEFAULT_SETTING = ("default: hybrid convex", "hybrid", None, "convex", {})


def llm_setting(top: int) -> tuple:
    return (f"default + llm rerank of the top {top}", "hybrid", "llm", "convex", {"rerank_top": top})


def llm_runtime(index, url: str) -> dict:
    """What served the llm reranker: the runtime's model card and the device it ran on."""
    from benchmarks.agent_suite import device_name
    reranker = index.rerankers.get("llm")
    card = reranker.client.get(f"{reranker.base_url}/v1/models").json()["data"][0]
    model = reranker.model or card["id"]
    return {"url": url, "model": model, "backend": card.get("backend"), "revision": card.get("revision"),
            "architecture": card.get("architecture"), "device": device_name(card.get("backend") or "cpu"),
            "concurrent_requests": min(reranker.parallel, index.settings.rerank_top), "max_doc_chars": reranker.max_doc_chars}


def chunking(text: str) -> tuple[int, int]:
    """'192/48' -> (192, 48): chunk tokens and overlap."""
    tokens, overlap = text.split("/")
    return int(tokens), int(overlap)


def installed(package: str) -> str | None:
    """The package's version, None where it is not installed (a GPU machine lacked pdfminer.six
    and the run's records were lost at the last line)."""
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("questions", type=Path, nargs="?", default=ROOT / "benchmarks" / "data" / "rag_questions.json")
    p.add_argument("--home", type=Path, default=ROOT / ".samevm" / "rag_eval")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "rag_eval.json")
    p.add_argument("--extractors", default=",".join(extract.EXTRACTORS), help="indexed and searched")
    p.add_argument("--subset-extractors", default="", help="of those, the ones indexed on --subset only")
    p.add_argument("--measure", default=",".join(extract.EXTRACTORS),
                   help="extractors whose glue rate and pages/s are measured (a superset of --extractors)")
    p.add_argument("--subset", default="auto-multiple-choice.en.pdf,manual.pdf", help="PDF file names")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads; on a CPU shared with other jobs one thread embeds faster than two")
    p.add_argument("--default-only", action="store_true",
                   help="search with the default setting alone (a latency rerun on a quieter machine)")
    p.add_argument("--settings", default="",
                   help="label substrings (comma-separated): search the default extractor with the default and "
                        "only the settings whose label holds one, e.g. 'query-phrase' for the bonus-off control")
    p.add_argument("--chunk-tokens", type=int, default=128)
    p.add_argument("--chunk-overlap", type=int, default=32)
    p.add_argument("--chunkings", default="", help="more TOKENS/OVERLAP cuts of the default extractor's text "
                   "(comma-separated), each indexed apart and searched with the default setting")
    p.add_argument("--context-embedding", action="store_true", help="also index the default extractor's chunks "
                   "embedded under their document title and heading path (RagIndex context_prefix) into a "
                   "collection of their own, searched with the default setting")
    p.add_argument("--pdfs", type=Path, help="folder of the PDFs (package/name or name; default HOME/pdfs)")
    p.add_argument("--llm-rerank-url", help="also rerank the default's hits with this runtime's chat model")
    p.add_argument("--llm-rerank-model", help="the model name to ask for (default: the first it lists)")
    p.add_argument("--llm-rerank-top", default="10", help="hits the llm reranker rescores (10,20: a record each)")
    args = p.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    spec = json.loads(args.questions.read_text())
    paths = [fetch(d, args.pdfs or args.home / "pdfs") for d in spec["documents"]]
    settings = WorkerSettings(home=args.home, runtime_url=args.llm_rerank_url, runtime_model=args.llm_rerank_model,
                              chunk_tokens=args.chunk_tokens, chunk_overlap=args.chunk_overlap)
    index = Services(settings).rag
    defaults, defaults_cut = index.settings, (index.chunk_tokens, index.chunk_overlap)
    extractors, results = {}, []
    subset_extractors = set(filter(None, args.subset_extractors.split(",")))
    for name in args.measure.split(","):
        docs, per_pdf = [], {}
        for path in paths:
            doc, glue, rate = read(path, name)
            docs.append(doc)
            per_pdf[path.name] = {"pages": len(doc.pages), "glue_rate": round(glue, 4), "pages_per_s": round(rate, 1)}
        extractors[name] = {"per_pdf": per_pdf}
        print(name, json.dumps(per_pdf), file=sys.stderr)
        if name not in args.extractors.split(","):
            continue
        questions = spec["questions"]
        if name in subset_extractors:
            keep = set(args.subset.split(","))
            docs = [d for d in docs if Path(d.source).name in keep]
            questions = [q for q in questions if q["source"] in keep]
            extractors[name]["indexed"] = sorted(keep)
        collection = f"eval-{name}" + ("-subset" if name in subset_extractors else "")
        t0 = time.perf_counter()
        rows = index.ingest_many(docs, collection)
        chunks = index.corpus(collection).count
        extractors[name].update(chunks=chunks, index_s=round(time.perf_counter() - t0, 1),
                                reused_index=all(r["status"] == "unchanged" for r in rows),   # pages/s not measured
                                index_pages_per_s=round(sum(len(d.pages) for d in docs) / (time.perf_counter() - t0), 1))
        runs = SETTINGS if name == extract.DEFAULT else SETTINGS[:1] + [DEFAULT_SETTING]
        runs = [DEFAULT_SETTING] if args.default_only else runs
        if args.settings and name == extract.DEFAULT:
            wanted = args.settings.split(",")
            runs = [DEFAULT_SETTING, *(r for r in SETTINGS if any(w in r[0] for w in wanted))]
        if args.llm_rerank_url and name == extract.DEFAULT:
            runs = [*runs, *(llm_setting(int(top)) for top in args.llm_rerank_top.split(","))]
        cuts = [(index.chunk_tokens, index.chunk_overlap, False, collection, runs)]
        if name == extract.DEFAULT:
            cuts += [(t, o, False, f"{collection}-{t}x{o}", [DEFAULT_SETTING])
                     for t, o in map(chunking, filter(None, args.chunkings.split(",")))]
            if args.context_embedding:
                cuts.append((*defaults_cut, True, f"{collection}-context", [DEFAULT_SETTING]))
        for tokens, overlap, context, where, searches in cuts:
            if where != collection:
                index.chunk_tokens, index.chunk_overlap, index.context_prefix = tokens, overlap, context
                index.ingest_many(docs, where)
                index.chunk_tokens, index.chunk_overlap, index.context_prefix = *defaults_cut, False
            count = index.corpus(where).count
            for label, mode, rerank, fusion, changes in searches:
                index.settings = replace(defaults, **changes)
                r = evaluate(index, questions, where, mode, rerank, fusion)
                is_default = (name == extract.DEFAULT and (mode, rerank, fusion) == DEFAULT_SETTING[1:4]
                              and index.settings == defaults and where == collection)
                label = (label if where == collection else f"{label}, chunks embedded under title and headings"
                         if context else f"{label}, {tokens}-token chunks, overlap {overlap}")
                results.append({"extractor": name, "setting": label, "pdfs": sorted({q["source"] for q in questions}),
                                "mode": mode, "rerank": rerank, "fusion": fusion,
                                **({"default": True} if is_default else {}), **asdict(index.settings), **r,
                                "chunks": count, "chunk_tokens": tokens, "chunk_overlap": overlap,
                                "context_prefix": context,
                                **({"llm_rerank": llm_runtime(index, args.llm_rerank_url)} if rerank == "llm" else {})})
                print(f"{name:12s} {label:48s} " + " ".join(f"{k}={r[k]}" for k in ("recall@1", "recall@5", "mrr@10",
                      "search_ms_median")) + "  min R@5/MRR per pdf " +
                      f"{min(v['recall@5'] for v in r['per_pdf'].values())}/{min(v['mrr@10'] for v in r['per_pdf'].values())}",
                      file=sys.stderr)
        index.settings = defaults
    load = os.getloadavg()
    report = {
        "benchmark": "rag_eval", "questions_file": str(args.questions.relative_to(ROOT)) if args.questions.is_relative_to(ROOT) else str(args.questions),
        "questions": len(spec["questions"]), "documents": spec["documents"], "threads": args.threads,
        "defaults": {"extractor": extract.DEFAULT, **asdict(defaults), "chunk_tokens": index.chunk_tokens,
                     "chunk_overlap": index.chunk_overlap, "embedding": index.embedder.name},
        "extractors": extractors, "results": results,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_1_5_15": [round(x, 2) for x in load],
                    "caveat": "CPU shared with other jobs while measuring (see load average): latencies and "
                              "pages/s are upper bounds of what an idle machine gives; recall and MRR do not depend on it"},
        "versions": {m: installed(m) for m in ("chromadb", "bm25s", "pypdf", "pypdfium2", "pdfminer.six",
                                               "sentence-transformers", "torch")},
        "pdftotext": subprocess.run(["pdftotext", "-v"], capture_output=True, text=True).stderr.splitlines()[0]
        if extract.pdftotext_path() else None,
    }
    save(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
