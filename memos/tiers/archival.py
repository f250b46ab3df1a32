"""The archival tier: everything that left the prompt, searchable by meaning and by keyword.

An :class:`ArchiveItem` row (SQLite, the source of truth) holds each archived piece: a
demoted unit (one message, or a whole tool chain), a superseded summary, a tool result
hidden behind a placeholder, or a note the agent archived. Rows are written in the
caller's transaction with ``indexed=False`` and an FTS5 entry (BM25 keyword search);
:meth:`ArchivalTier.flush` then embeds them and upserts the vectors into Chroma, by id,
so a repeated flush is harmless. Rows still unindexed after a crash or a Chroma outage
are found and flushed again (an outbox). The flush can run on a background worker, so
that embedding never holds up the caller: keyword search sees an item at once, dense
search once its vector is written. :meth:`ArchivalTier.reindex` rebuilds the
namespace's vectors from the rows.

Search fuses the dense and keyword rankings by reciprocal rank (:func:`rrf`), filtered
by namespace, time range, kind and role. Where the embedding model gives token states, the
flush stores them beside the vector and search ranks the candidates a third time by late
interaction (:mod:`memos.tiers.late`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from ..storage.items import ARCHIVE_KINDS, TURN_KINDS, WITHOUT_TOKENS, ArchiveItem, Hit, archive_keywords
from ..storage.log import chunks
from ..storage.vectors import ArchiveBackend, ChromaBackend, Indexer
from ..text.embeddings import Embedder, TokenStates, covers, token_states
from ..text.patterns import find_codes
from ..text.search import query_terms
from . import late

__all__ = [
    "ARCHIVE_KINDS",
    "ArchivalTier",
    "Indexer",
    "ArchiveBackend",
    "ArchiveItem",
    "ChromaBackend",
    "Hit",
    "WITHOUT_TOKENS",
    "archive_keywords",
    "rrf",
]

log = logging.getLogger("memos.archive")

# Reciprocal rank fusion's k. The usual 60 flattens the head of each ranking; 20 was chosen on
# three LoCoMo conversations (evidence recall in a fixed room 0.725 -> 0.749) and held on the
# other four (0.683 -> 0.705).
RRF_K = 20
# How many of the fused candidates late interaction ranks again. On LoCoMo conversations 0-2
# at 2,048 tokens: all of them (up to 960 for auto-recall) 0.868, 300 0.866, 200 0.860; 300
# keeps auto-recall's added p95 at about 13 ms instead of 48 (10k items).
TOKEN_CANDIDATES = 300
# The token ranking's weight in the fusion (dense and keyword weigh 1). Evidence recall over raw
# LoCoMo turns at 2,048 tokens, conversations 0-2 (tuned on): weight 1 -> 0.875, 2 -> 0.889
# (with k = 60, 1.5 and 3 scored below 2); checked on 3-6: 0.825 -> 0.835.
TOKEN_WEIGHT = 2.0
# A query that names codes (an order number, a booking reference, an email:
# patterns.find_codes) ranks the items holding them once more, by keyword on the codes alone,
# and that ranking weighs CODE_SHARE times the other searches together. The dense and token
# models read ORD-20140 and ORD-20130 as nearly the same text, and an item whose vector is not
# written yet (the indexer behind, a process killed before it caught up) is found by keyword
# alone: without it, a keyword match of the exact code (a quarter of the best score) fell
# behind near-misses found by meaning.
CODE_SHARE = 1.0
# A turn is ranked with the turns around it: the evidence of a question sits among turns on the
# same topic, and the turn that holds it often shares few words with the question ("what did
# she research?" answered by "adoption agencies", two turns after the one that matches). Each
# candidate is ranked by its own fused score plus, for the turns 1, 2 and 3 places away in its
# session, these weights times the best fused score among them. Evidence recall over raw LoCoMo
# turns in a fixed room of 1,400 tokens: 0.868 -> 0.886 on conversations 0-2 (chosen there,
# among weights of one to three places), 0.802 -> 0.844 on 3-6, against the previous rule (each
# hit followed by the turn after it); in rooms of 800 and 2,000 tokens 0.770 -> 0.810 and
# 0.853 -> 0.887 over all seven.
CONTEXT_WEIGHTS = (0.5, 0.25, 0.125)
# How many of the best candidates lend their score to the turns around them (30 gave 0.858,
# every candidate 0.860 in the room above).
CONTEXT_CANDIDATES = 64
# A second hop: the answer to "how long is the event whose programme is X?" is a message that
# names the event ("the job fair lasts eight weeks"), which shares with the question only
# "how long", as every other event's duration does. The message that matches X names the
# event. So each of the BRIDGE_FROM best candidates is searched again by keyword, on its words
# the query lacks (the event) with the query's words it lacks ("how long"), and that search's
# best item (not one of those candidates) ranks at BRIDGE_LEND times its score, if that is more
# than its own (ArchivalTier._bridged). Chosen on MemDaily trajectories 0-39 (target recall
# 0.716 -> 0.738, among 1-3 lenders and shares 0.5-0.95; 02_conditional_events 0.775 -> 0.95)
# and checked on trajectories 40-79 (0.819 -> 0.845, means of the files); on LoCoMo
# conversations 0-2 at 2,048 tokens 0.886 -> 0.886 (multi-hop 0.691 -> 0.697), over all seven
# 0.861 -> 0.858.
BRIDGE_FROM = 3
BRIDGE_LEND = 0.85
# The hop's item is the best of its BRIDGE_DEPTH keyword matches that names both the lender's
# words and the query's ("那个生日是07月15日的人，…其工作地…" from "我表弟的生日是7月15日。": "我表弟在浙江杭州工作呢。",
# not "我表弟的邮箱地址是…", which matched more of the lender's words), else the best match.
# MemDaily trajectories 0-39 0.738 -> 0.747 (`05_post_processing_roles` 0.725 -> 0.763).
BRIDGE_DEPTH = 30
_ROLE_LABEL = re.compile(r"^(?:user|assistant|system): ", re.MULTILINE)  # as memos.tiers.archiving.item_line names a line's role


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K, *, normalise: bool = False,
        weights: Sequence[float] | None = None) -> dict[str, float]:
    """Reciprocal rank fusion: each id scores the sum of weight / (k + rank) over the
    rankings (each weight 1 unless ``weights`` are given). ``normalise`` divides by the
    best score possible (first in every ranking), giving [0, 1]."""
    w = [1.0] * len(rankings) if weights is None else [float(x) for x in weights]
    if len(w) != len(rankings):
        raise ValueError(f"{len(w)} weights for {len(rankings)} rankings")
    scores: dict[str, float] = {}
    for weight, ranking in zip(w, rankings, strict=True):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    if normalise and rankings and sum(w) > 0:
        best = sum(w) / (k + 1)
        scores = {i: v / best for i, v in scores.items()}
    return scores


class ArchivalTier:
    """The archived items of one namespace, with hybrid search."""

    def __init__(
        self,
        engine: Engine,
        namespace: str,
        backend: ArchiveBackend | Callable[[], ArchiveBackend | None] | None,
        embedder: Embedder | Callable[[], Embedder | None] | None,
        *,
        indexer: Indexer | None = None,
        token_index: bool = True,
        owns_backend: bool = False,
    ) -> None:
        """``backend`` and ``embedder`` may be given as zero-argument factories: they are
        then called on first dense use (opening Chroma and loading a model take time).
        With an ``indexer``, :meth:`schedule` embeds on its thread; without one, at once.
        ``token_index`` stores token states and ranks by them (:mod:`memos.tiers.late`)
        where the embedder gives them. ``owns_backend``: the backend is this tier's alone,
        released by :meth:`close`."""
        self.engine = engine
        self.namespace = namespace
        self._backend_spec = backend
        self._embedder_spec = embedder
        self._resolved = False
        self.backend: ArchiveBackend | None = None
        self.embedder: Embedder | None = None
        self.keywords = archive_keywords(engine)
        self.version = 0
        self._warned = False
        self._lock = threading.RLock()
        self._queries: dict[str, tuple[Any, TokenStates | None]] = {}  # query -> its vector and token states
        self._vectors_seen = False
        self.indexer = indexer
        self.token_index = token_index
        self.tokens = late.TokenIndex(engine, namespace)
        self._owns_backend = owns_backend

    def close(self) -> None:
        """Release a backend this tier opened for itself (a session's own Chroma path or
        server); vectors not yet written stay queued in the store for the next open."""
        if not self._owns_backend:
            return
        if self.indexer is not None:
            self.indexer.discard(self)
        with self.indexer.paused() if self.indexer is not None else contextlib.nullcontext(), self._lock:
            backend, self.backend, self._resolved = self.backend, None, False
        close = getattr(backend, "close", None)
        if close is not None:
            close()

    def _resolve(self) -> None:
        if self._resolved:
            return
        with self._lock:  # the worker thread and the caller may both get here first
            if self._resolved:
                return
            b, e = self._backend_spec, self._embedder_spec
            try:
                self.backend = b() if callable(b) and not isinstance(b, ArchiveBackend) else b  # type: ignore[assignment]
            except Exception as exc:
                log.warning("the archive backend could not be opened (%s); archival search runs keyword-only", exc)
                self.backend = None
            self.embedder = e() if callable(e) and not isinstance(e, Embedder) else e  # type: ignore[assignment]
            self._resolved = True
            self._check_model()

    def _check_model(self) -> None:
        """Vectors written by another embedding model than this one (the model folder was
        changed) are deleted and written again with this one: two models' vectors never mix."""
        tag = getattr(self.backend, "tag_model", None)
        name = getattr(self.embedder, "name", None)
        if not callable(tag) or not name:
            return
        try:
            recorded = tag(self.namespace, name)
        except Exception as exc:  # the backend is checked again by the next search or flush
            log.debug("the archive's embedding model could not be read (%s)", exc)
            return
        if recorded is None or recorded == name:
            return
        log.warning("the archive's vectors were written by %s; they are written again with %s", recorded, name)
        self.backend.delete(self.namespace)  # type: ignore[union-attr]
        tag(self.namespace, name)
        self._unindex()

    def _unindex(self) -> None:
        """Mark every item of the namespace for embedding again (its token states dropped)."""
        with Session(self.engine) as s:
            s.execute(update(ArchiveItem).where(col(ArchiveItem.namespace) == self.namespace)
                      .values(indexed=False, token_ids=None, token_states=None))
            s.commit()
        self._vectors_seen = False
        self.tokens.reset()

    @property
    def model(self) -> Embedder | None:
        """The embedding model, loaded on first use; None without one."""
        self._resolve()
        return self.embedder

    def query_vector(self, query: str) -> Any:
        """``query``'s vector by the embedding model, cached with the one search uses."""
        self._resolve()
        return self._query(query)[0]

    @property
    def dense(self) -> bool:
        """Whether dense search is available (a model and a vector backend)."""
        self._resolve()
        return self.backend is not None and self.embedder is not None

    # -- writes --------------------------------------------------------------------

    def stage(self, session: Session, items: Iterable[ArchiveItem]) -> int:
        """Write items (and their keyword index) in the caller's transaction, unindexed.
        An item whose id is already stored (written by another process meanwhile) is skipped."""
        fresh = list({i.id: i for i in items}.values())
        if not fresh:
            return 0
        ids = [i.id for i in fresh]
        stored = select(ArchiveItem.id)
        have = {i for part in chunks(ids) for i in session.exec(stored.where(col(ArchiveItem.id).in_(part))).all()}
        fresh = [i for i in fresh if i.id not in have]
        if not fresh:
            return 0
        dialect = session.get_bind().dialect.name
        if dialect in ("sqlite", "postgresql"):
            from sqlalchemy.dialects import postgresql, sqlite

            # one multi-row INSERT; RETURNING names the rows written (another process may have won some)
            ins = ((sqlite.insert if dialect == "sqlite" else postgresql.insert)(ArchiveItem)
                   .on_conflict_do_nothing(index_elements=["id"]).returning(col(ArchiveItem.id)))
            written = set(session.execute(ins, [i.model_dump() for i in fresh]).scalars().all())
            fresh = [i for i in fresh if i.id in written]
        else:
            session.add_all(fresh)
            session.flush()
        self.keywords.add(session, [(i.id, i.namespace, i.text) for i in fresh])
        if fresh:
            self.version += 1
        return len(fresh)

    def flush(self, limit: int | None = None) -> int:
        """Embed unindexed items and write their vectors; returns how many were written.

        Failures are warned about once and leave the items queued for the next flush.
        """
        if not self.dense:
            return 0
        with self._lock, Session(self.engine, expire_on_commit=False) as s:  # one flush at a time
            q = select(ArchiveItem).where(ArchiveItem.namespace == self.namespace, ArchiveItem.indexed == False)  # noqa: E712
            rows = list(s.exec(q.order_by(col(ArchiveItem.archived_at)).limit(limit)).all() if limit else s.exec(q).all())
            if not rows:
                return 0
            try:
                texts = [r.text for r in rows]
                both = token_states(self.embedder, texts) if self.token_index else None
                vecs, states = both if both is not None else (self.embedder(texts), None)  # type: ignore[misc]
                self.backend.upsert(  # type: ignore[union-attr]
                    self.namespace, ids=[r.id for r in rows], embeddings=vecs, documents=texts,
                    metadatas=[_metadata(r) for r in rows],
                )
            except Exception as exc:
                if not self._warned:
                    log.warning("archival vectors could not be written (%s); they stay queued", exc)
                    self._warned = True
                return 0
            for i, r in enumerate(rows):
                r.indexed = True
                if states is not None:
                    r.token_ids, r.token_states = late.pack(states[i])
                s.add(r)
            s.commit()
            if states is not None:
                self.tokens.written([r.token_ids for r in rows if r.token_ids is not None])
            self.version += 1
            self._vectors_seen = True
            return len(rows)

    def schedule(self) -> None:
        """Flush soon: on the indexer's thread when there is one, else now."""
        if self.indexer is None:
            self.flush()
            return
        # Chroma and the model are opened (imported) here, on the caller's thread: imported on
        # the indexer's thread while the caller imports openai, a module both need (httpx) can
        # be seen half-initialised by one of them
        self._resolve()
        self.indexer.schedule(self)

    def _has_vectors(self) -> bool:
        """Whether any item of this namespace has its vector written (Chroma errors on a
        collection that holds none yet)."""
        if not self._vectors_seen:
            with Session(self.engine) as s:
                self._vectors_seen = s.exec(select(ArchiveItem.id).where(
                    ArchiveItem.namespace == self.namespace, ArchiveItem.indexed == True).limit(1)).first() is not None  # noqa: E712
        return self._vectors_seen

    def pending(self) -> int:
        """Items of this namespace whose vectors are not written yet."""
        with Session(self.engine) as s:
            return int(s.exec(select(func.count()).select_from(ArchiveItem).where(
                ArchiveItem.namespace == self.namespace, ArchiveItem.indexed == False)).one())  # noqa: E712

    def reindex(self) -> int:
        """Drop this namespace's vectors and write them again from the rows; returns the count."""
        if self.dense:
            self.backend.delete(self.namespace)  # type: ignore[union-attr]
        self._unindex()
        total = 0
        while True:
            n = self.flush(limit=512)
            total += n
            if n == 0:
                return total

    # -- reads ---------------------------------------------------------------------

    def count(self) -> int:
        """Items archived in this namespace."""
        with Session(self.engine) as s:
            return int(s.exec(select(func.count()).select_from(ArchiveItem).where(ArchiveItem.namespace == self.namespace)).one())

    def empty(self) -> bool:
        """Whether nothing is archived in this namespace yet (cheaper than ``count() == 0``)."""
        with Session(self.engine) as s:
            return s.exec(select(ArchiveItem.id).where(ArchiveItem.namespace == self.namespace).limit(1)).first() is None

    def has_items_beyond(self, session: str) -> bool:
        """Whether this namespace holds anything besides ``session``'s own messages (which
        are archived as they arrive): another session's items, a summary, a note."""
        with Session(self.engine) as s:
            q = select(ArchiveItem.id).where(ArchiveItem.namespace == self.namespace,
                                             (ArchiveItem.session != session) | (ArchiveItem.kind != "message"))
            return s.exec(q.limit(1)).first() is not None

    def get(self, item_id: str) -> ArchiveItem | None:
        """One item of this namespace by id."""
        with Session(self.engine) as s:
            row = s.get(ArchiveItem, item_id)
            return row if row is not None and row.namespace == self.namespace else None

    def dense_ids(self, query: str, n: int, *, min_similarity: float | None = None) -> list[str]:
        """Ids of the ``n`` items nearest to ``query`` by meaning (empty when dense search is
        off), only those with cosine similarity >= ``min_similarity`` if given."""
        return list(self.dense_similarities(query, n, min_similarity=min_similarity))

    def dense_similarities(self, query: str, n: int, *, min_similarity: float | None = None,
                           relative_similarity: float | None = None) -> dict[str, float]:
        """:meth:`dense_ids` with each item's cosine similarity to ``query``, nearest first
        (none for a query the model does not cover: see :func:`memos.text.embeddings.covers`).
        ``relative_similarity`` also drops those less similar than that share of the nearest's."""
        if n <= 0 or not self._dense_runs(query):
            return {}
        try:
            found = self.backend.query(self.namespace, self._query(query)[0], n)  # type: ignore[union-attr]
            floor = min_similarity if min_similarity is not None else -1.0
            if relative_similarity is not None and found:
                floor = max(floor, relative_similarity * max(1.0 - d for _, d in found))
            return {i: 1.0 - d for i, d in found if 1.0 - d >= floor}
        except Exception as exc:
            if not self._warned:
                log.warning("dense search failed (%s); using keyword search alone", exc)
                self._warned = True
            return {}

    def _query(self, query: str) -> tuple[Any, TokenStates | None]:
        """The query's vector and (with ``token_index``, where the embedder gives them) its
        token states, from one forward pass, cached."""
        hit = self._queries.get(query)
        if hit is None:
            both = token_states(self.embedder, [query]) if self.token_index else None
            hit = (both[0][0], both[1][0]) if both is not None else (self.embedder([query])[0], None)  # type: ignore[misc]
            if len(self._queries) >= 256:
                self._queries.pop(next(iter(self._queries)), None)  # another thread may have taken it
            self._queries[query] = hit
        return hit

    def token_ranking(self, query: str, ids: Iterable[str]) -> list[str]:
        """``ids`` ranked by late interaction with ``query`` (:class:`memos.tiers.late.TokenIndex`),
        best first; those without token states are left out. Empty when the embedder gives
        no token states or ``token_index`` is off."""
        if not self.token_index or not self._dense_runs(query):
            return []
        q = self._query(query)[1]
        return self.tokens.ranking(q, ids) if q is not None else []

    def _dense_runs(self, query: str) -> bool:
        """Whether dense search can rank ``query``: a model that covers it and vectors to search."""
        return self.dense and covers(self.embedder, query) and self._has_vectors()

    def keyword_ids(self, query: str, n: int) -> list[str]:
        """Ids of the ``n`` best items for ``query`` by keyword (BM25 on SQLite, PostgreSQL's
        full-text search, else LIKE; see :mod:`memos.text.search`)."""
        with Session(self.engine) as s:
            return self.keywords.search(s, self.namespace, query, n)

    def search(
        self,
        query: str,
        top_k: int = 5,
        *,
        since: float | None = None,
        until: float | None = None,
        kinds: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
        exclude_message_ids: Iterable[str] = (),
        offset: int = 0,
        mode: str = "hybrid",
        min_similarity: float | None = None,
        relative_similarity: float | None = None,
        pool: int | None = None,
    ) -> list[Hit]:
        """The best items for ``query``: dense and keyword rankings fused by reciprocal rank.

        ``mode`` is 'hybrid', 'dense' or 'keyword'. Items whose messages are all in
        ``exclude_message_ids`` (already in the prompt) are skipped; hits are
        deduplicated by their source messages. ``min_similarity`` drops dense candidates
        less similar than that (cosine) to the query, ``relative_similarity`` those less
        similar than that share of the most similar candidate's similarity. ``pool``: how many
        candidates each search gives (default eight per item wanted, at least 50); the same
        pool gives the same order however many items are asked for.
        """
        want = top_k + offset
        # filters apply to the fused candidates, so a filtered search looks further
        pool = (pool or max(50, want * 8)) * (4 if since is not None or until is not None or kinds or roles else 1)
        scores, similarity, found_in = self._fused(query, pool, mode, min_similarity, relative_similarity)
        if not scores:
            return []
        rank = self.in_context(scores)
        excluded = set(exclude_message_ids)
        hits: list[Hit] = []
        covered: set[str] = set()
        with Session(self.engine) as s:
            for item_id, r in self._best_first(s, sorted(rank, key=lambda i: -rank[i]), max(64, 2 * want)):
                if r is None or r.namespace != self.namespace:
                    continue
                if since is not None and r.created_at < since or until is not None and r.created_at > until:
                    continue
                if kinds and r.kind not in kinds:
                    continue
                item_roles = tuple(x for x in r.roles.split(",") if x)
                if roles and not set(roles) & set(item_roles):
                    continue
                mids = tuple(json.loads(r.message_ids))
                if mids and (set(mids) <= excluded or set(mids) <= covered):
                    continue
                covered.update(mids)
                hits.append(Hit(r.id, r.kind, r.text, scores.get(item_id, 0.0), mids, r.first_seq, r.last_seq,
                                item_roles, r.created_at, "archive", r.session, similarity.get(item_id),
                                tuple(found_in.get(item_id, ["context"]))))
                if len(hits) >= want:
                    break
        return hits[offset:want]

    def in_context(self, scores: dict[str, float]) -> dict[str, float]:
        """Each candidate's rank key: its fused score plus, for the turns 1, 2 and 3 places away
        in its session, ``CONTEXT_WEIGHTS`` times the best fused score among those of the best
        ``CONTEXT_CANDIDATES`` candidates. The turns next to those best candidates join the
        candidates (their own score 0 when no search found them), each ranked behind the
        best-scoring turn that lent to it. Items that are not turns (summaries, notes) keep
        their score."""
        best = sorted(scores, key=lambda i: -scores[i])[:CONTEXT_CANDIDATES]
        span = len(CONTEXT_WEIGHTS)
        with Session(self.engine) as s:
            # by id alone, then filtered here: with the other terms in the query, SQLite walked the
            # namespace's index (every item of the scope) instead of looking the ids up
            rows = s.exec(select(ArchiveItem).options(*WITHOUT_TOKENS).where(col(ArchiveItem.id).in_(best))).all()
            tops = [(r.id, r.session, r.first_seq, r.last_seq) for r in rows
                    if r.namespace == self.namespace and r.kind in TURN_KINDS and r.session != ""]
            if not tops:
                return scores
            turns = (ArchiveItem.namespace == self.namespace, col(ArchiveItem.session).in_(sorted({t[1] for t in tops})),
                     col(ArchiveItem.kind).in_(TURN_KINDS))
            after = sorted({t[3] + d for t in tops for d in range(1, span + 1)})
            before = sorted({t[2] - d for t in tops for d in range(1, span + 1)})
            columns = (ArchiveItem.id, ArchiveItem.session, ArchiveItem.first_seq, ArchiveItem.last_seq)
            # two queries, not one with OR, so that each runs on an index of its own
            near = {*s.exec(select(*columns).where(*turns, col(ArchiveItem.first_seq).in_(after))).all(),
                    *s.exec(select(*columns).where(*turns, col(ArchiveItem.last_seq).in_(before))).all()}
        starting = {(r[1], r[2]): r[0] for r in near}
        ending = {(r[1], r[3]): r[0] for r in near}
        # for each turn and distance, the best score among the turns that far before or after it
        lent: dict[tuple[str, int], float] = {}
        lender: dict[str, str] = {}  # each turn's best-scoring lender
        for top_id, session, first, last in tops:
            for d in range(1, span + 1):
                for item_id in (starting.get((session, last + d)), ending.get((session, first - d))):
                    if item_id is not None:
                        lent[item_id, d] = max(lent.get((item_id, d), 0.0), scores[top_id])
                        if item_id not in lender or scores[top_id] > scores[lender[item_id]]:
                            lender[item_id] = top_id
        out = dict(scores)
        for (item_id, d), score in lent.items():
            out[item_id] = out.get(item_id, 0.0) + CONTEXT_WEIGHTS[d - 1] * score
        # the turn a query matches is not pushed out of a short list by its neighbours
        ranked = dict(out)
        for item_id, top_id in lender.items():
            if scores[top_id] > scores.get(item_id, 0.0):
                ranked[item_id] = min(out[item_id], out[top_id] * (1 - 1e-9))
        return ranked

    @staticmethod
    def _best_first(s: Session, ranked: list[str], step: int) -> Iterator[tuple[str, ArchiveItem | None]]:
        """Each ranked id with its row (None when it is gone), the rows read a slice of
        ``step`` at a time: a search usually stops long before its last candidate."""
        for lo in range(0, len(ranked), step):
            part = ranked[lo : lo + step]
            rows = {r.id: r for r in s.exec(
                select(ArchiveItem).options(*WITHOUT_TOKENS).where(col(ArchiveItem.id).in_(part))).all()}
            for item_id in part:
                yield item_id, rows.get(item_id)

    def _fused(self, query: str, pool: int, mode: str, min_similarity: float | None,
               relative_similarity: float | None = None
               ) -> tuple[dict[str, float], dict[str, float], dict[str, list[str]]]:
        """The candidates' fused scores, the dense search's similarities and which searches
        found each candidate."""
        rankings: list[list[str]] = []
        similarity: dict[str, float] = {}
        searches: list[str] = []
        # a search that cannot run (no model, a query the model does not cover) does not count
        if mode in ("hybrid", "dense") and self._dense_runs(query):
            similarity = self.dense_similarities(query, pool, min_similarity=min_similarity,
                                                 relative_similarity=relative_similarity)
            rankings.append(list(similarity))
            searches.append("dense")
        if mode in ("hybrid", "keyword"):
            rankings.append(self.keyword_ids(query, pool))
            searches.append("keyword")
        found_in: dict[str, list[str]] = {}
        for name, ranking in zip(searches, rankings, strict=True):
            for i in ranking:
                found_in.setdefault(i, []).append(name)
        weights = [1.0] * len(rankings)
        scores = rrf(rankings, normalise=True)
        if mode == "hybrid" and "dense" in searches:  # the best candidates ranked a third time, token by token
            best = sorted(scores, key=lambda i: -scores[i])[:TOKEN_CANDIDATES]
            by_tokens = self.token_ranking(query, best)
            if by_tokens:
                rankings.append(by_tokens)
                weights.append(TOKEN_WEIGHT)
        codes = find_codes(query) if mode in ("hybrid", "keyword") else []
        holding = self.keyword_ids(" ".join(codes), pool) if codes else []
        if holding:
            rankings.append(holding)
            weights.append(CODE_SHARE * sum(weights))
            for i in holding:
                if "keyword" not in found_in.setdefault(i, []):
                    found_in[i].append("keyword")
        fused = rrf(rankings, normalise=True, weights=weights)
        if mode == "hybrid":
            for item_id, score in self._bridged(query, fused).items():
                fused[item_id] = max(fused.get(item_id, 0.0), score)
                found_in.setdefault(item_id, []).append("bridge")
        return fused, similarity, found_in

    def _bridged(self, query: str, scores: dict[str, float]) -> dict[str, float]:
        """The items a second hop from the best candidates finds, with the scores they rank by
        (see ``BRIDGE_FROM``): for each lender, a keyword search on its words the query lacks
        and the query's words it lacks, and of its best ``BRIDGE_DEPTH`` items (lenders aside)
        the first that names words of both sides, else the first."""
        lenders = sorted(scores, key=lambda i: -scores[i])[:BRIDGE_FROM]
        if not lenders:
            return {}
        asked = query_terms(query)
        wanted = set(asked)
        out: dict[str, float] = {}
        with Session(self.engine) as s:
            texts = dict(s.exec(select(ArchiveItem.id, ArchiveItem.text).where(col(ArchiveItem.id).in_(lenders))).all())
            for lender in lenders:
                if lender not in texts:
                    continue
                held = query_terms(_ROLE_LABEL.sub("", texts[lender]))  # the words said, not who said them
                told = set(held)
                entity = [t for t in held if t not in wanted]  # what the lender is about
                relation = [t for t in asked if t not in told]  # what the query asks of it
                bridge = entity + relation
                best = [i for i in self.keywords.search(s, self.namespace, " ".join(bridge), BRIDGE_DEPTH)
                        if i not in lenders] if bridge else []
                if not best:
                    continue
                said = dict(s.exec(select(ArchiveItem.id, ArchiveItem.text).where(col(ArchiveItem.id).in_(best))).all())
                sides = (set(entity), set(relation))
                found = next((i for i in best if _names_both(said.get(i, ""), *sides)), best[0])
                out[found] = max(out.get(found, 0.0), BRIDGE_LEND * scores[lender])
        return out


def _names_both(text: str, entity: set[str], relation: set[str]) -> bool:
    """Whether ``text`` (an archived item's) names a term of both sides of a second hop."""
    terms = set(query_terms(_ROLE_LABEL.sub("", text)))
    return bool(terms & entity) and bool(terms & relation)


def _metadata(r: ArchiveItem) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": r.namespace, "kind": r.kind, "first_seq": r.first_seq,
                            "last_seq": r.last_seq, "created_at": r.created_at, "roles": r.roles}
    return meta
