"""Archival retrieve latency and embedding throughput at 1k / 10k / 100k archived units.

    python -m benchmarks.archival --sizes 1000,10000,100000 --out benchmarks/results/archival.json

Units are short synthetic conversation turns (a sentence with a name, a place, an
amount or an id). Each size gets a fresh store: a SQLite file and a Chroma folder on
disk. A retrieve is ``Memory.retrieve``'s archival search, hybrid (dense + BM25, and late
interaction over their candidates, fused by reciprocal rank) for top_k 5, which asks the
search for 10 items (a message said again word for word is listed once), including the query's
embedding (every query is new text, so no cached vector is reused); auto-recall's search
(60 items) is timed beside it, and the token states' bytes on disk are counted. Needs the all-MiniLM-L6-v2 ONNX model
(``MEMOS_EMBEDDING_MODEL_DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from memos.bench.progress import Progress
from memos.cli.bench import write_results
from memos.retrieval.recall import search_depth
from memos.storage.log import Store
from memos.text.embeddings import load_embedder
from memos.tiers.archival import ArchivalTier, ArchiveItem, ChromaBackend

SUBJECTS = ["Maya", "Tom", "the hotel", "my sister", "the airline", "our landlord", "the dentist", "Priya", "the bank"]
VERBS = ["confirmed", "moved", "cancelled", "asked about", "paid for", "forgot", "rescheduled", "recommended"]
OBJECTS = ["the booking", "dinner on Friday", "the flight to Lisbon", "a refund", "the appointment", "the invoice",
           "a table for four", "the museum tickets", "the rental car", "the order"]
PLACES = ["in Chiado", "near the station", "at the office", "by email", "over the phone", "downtown", "at noon"]


def synthetic_text(rng: random.Random, i: int) -> str:
    extra = rng.choice([f" (ref ORD-{rng.randint(10000, 99999)})", f" for ${rng.randint(5, 900)}", "",
                        f" on 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"])
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)}{extra}. #{i}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def embed_throughput(texts: list[str]) -> float:
    emb = load_embedder()
    if emb is None:
        raise SystemExit("no embedding model: set MEMOS_EMBEDDING_MODEL_DIR")
    emb(texts[:64])  # warm up
    start = time.perf_counter()
    emb(texts)
    return len(texts) / (time.perf_counter() - start)


def run_size(n: int, queries: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix=f"memos-bench-{n}-"))
    store = Store(folder / "bench.db")
    tier = ArchivalTier(store.engine, "bench/agent/s1", ChromaBackend.persistent(folder / "chroma"), load_embedder())
    start = time.perf_counter()
    now = time.time()
    for lo in range(0, n, 2000):
        with store.db() as s:
            tier.stage(s, [ArchiveItem(id=f"b{i}", namespace="bench/agent/s1", kind="message", text=synthetic_text(rng, i),
                                       message_ids=json.dumps([f"m{i}"]), first_seq=i, last_seq=i, roles="user",
                                       created_at=now - (n - i)) for i in range(lo, min(n, lo + 2000))])
            s.commit()
        while tier.flush(limit=1024):
            pass
    ingest_s = time.perf_counter() - start
    for i in range(5):  # warm up the index
        tier.search(f"warm up query {i}", 5)
    lat: list[float] = []
    recall_lat: list[float] = []
    for i in range(queries):
        q = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {i}"
        t0 = time.perf_counter()
        hits = tier.search(q, search_depth(5))  # as retrieve(top_k=5) searches
        lat.append((time.perf_counter() - t0) * 1000)
        assert hits, "a retrieve found nothing"
        t0 = time.perf_counter()
        tier.search(q + " again", 60)  # auto-recall's search: 60 items, 480 candidates a ranking
        recall_lat.append((time.perf_counter() - t0) * 1000)
    with store.db() as s:
        stored = s.execute(text("SELECT coalesce(sum(length(token_ids) + length(token_states)), 0) "
                                "FROM memos_archive")).scalar_one()
    store.close()
    shutil.rmtree(folder, ignore_errors=True)  # a 100k store is ~0.8 GB
    return {"units": n, "ingest_s": round(ingest_s, 1), "p50_ms": round(percentile(lat, 0.5), 2),
            "p95_ms": round(percentile(lat, 0.95), 2), "mean_ms": round(statistics.fmean(lat), 2), "queries": queries,
            "recall_p50_ms": round(percentile(recall_lat, 0.5), 2), "recall_p95_ms": round(percentile(recall_lat, 0.95), 2),
            "token_bytes_per_unit": round(stored / n)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", default=None, help="write the results as JSON here (default: a new file in ./memos-bench/)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    texts = [synthetic_text(rng, i) for i in range(2048)]
    tput = embed_throughput(texts)
    print(f"embedding: {tput:.0f} short texts/s")
    results = []
    sizes = [int(x) for x in args.sizes.split(",")]
    with Progress("archive sizes") as progress:
        for i, n in enumerate(sizes):
            progress.update(i, len(sizes), f"{n:,} items: filling and embedding")
            r = run_size(n, args.queries, args.seed)
            print(json.dumps(r))
            results.append(r)
            progress.update(i + 1, len(sizes), f"{n:,} items done")
    out = {
        "benchmark": "archival",
        "params": {"sizes": args.sizes, "queries": args.queries, "model": "all-MiniLM-L6-v2 (ONNX)",
                   "search": "hybrid: dense + BM25 + late interaction over their candidates, RRF; top 10 (retrieve with top_k 5) "
                             "and top 60 (auto-recall); query embedding included",
                   "cpus": os.cpu_count(), "python": platform.python_version(),
                   "date": time.strftime("%Y-%m-%d")},
        "embedding_texts_per_s": round(tput, 1),
        "results": results,
        "targets": {"p95_ms_at_100k": 25, "embedding_texts_per_s": 500},
    }
    write_results(out, "archival", args.out)


if __name__ == "__main__":
    main()
