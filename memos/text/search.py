"""Keyword search, one way for every tier: one tokeniser, one stop-word set, one index.

:func:`tokens` splits text into lower-cased words (an identifier such as ``ORD-12345``
stays one word) and, for Chinese and Japanese, which have no spaces, every character and
every two-character window of a run of Han characters, so ``预算`` is found inside
``我的预算不超过500元`` and an id glued to Chinese (``订单号是ORD-88123，``) is a word of its
own. Full-width letters and digits and the other hyphens read as ASCII ones
(:func:`memos.text.patterns.fold`: ``ＯＲＤ－８８１２３`` is ``ord-88123``; not with the ``LIKE``
fallback below). :func:`query_terms` is
the same tokeniser on a query, less stop words and single characters of a longer run, its
first 128 (enough that a long message's question, which tends to come last, is still
searched). A Chinese query is searched in both scripts, Simplified and Traditional
(:func:`memos.text.script.both_scripts`): the index holds the text as it was written.

:class:`KeywordIndex` keeps one full-text index over rows ``(ref, namespace, text)``:

- on SQLite, an FTS5 table holding the tokens (``unicode61``; BM25 ranking). Terms that
  are in more than 2 % of the rows (at least 200) are left out of a query when rarer ones
  remain: they add almost nothing to BM25 and make FTS5 score every row holding them;
- on PostgreSQL, a GIN index on ``to_tsvector('simple', ...)`` of the source table's text,
  folded (ranked by ``ts_rank_cd``; each term through ``plainto_tsquery``), and Chinese
  terms as substrings;
- elsewhere, ``LIKE``, ranked by the number of terms matched.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from .patterns import FOLD_TABLE, fold
from .script import both_scripts
from .terms import STOP_WORDS

__all__ = ["KeywordIndex", "index_text", "query_terms", "tokens"]

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_HAN}]+|[^\W_{_HAN}]+(?:[-_./@:#][^\W_{_HAN}]+)*", re.UNICODE)
_IS_HAN = re.compile(rf"[{_HAN}]")
_MAX_TERMS = 128
_DELETE_BATCH = 500
_MAX_PARTS = 8  # a term's first parts: a longer one (a-b-c-…, pasted) is no rarer for the rest


def tokens(text_: str) -> list[str]:
    """The index's tokens of ``text_``, in order (see the module docs)."""
    out: list[str] = []
    for m in _TOKEN.finditer(fold(text_).lower()):
        w = m.group(0)
        if _IS_HAN.match(w):
            out.extend(w)
            out.extend(w[i : i + 2] for i in range(len(w) - 1))
        else:
            out.append(w)
    return out


def index_text(text_: str) -> str:
    """What the full-text index stores for ``text_``: its tokens, space-separated."""
    return " ".join(tokens(text_))


def query_terms(query: str, limit: int = _MAX_TERMS) -> list[str]:
    """The terms a query is matched by: words of two characters or more that are not stop
    words, identifiers, and the bigrams of Chinese runs (a lone character when the run is one)."""
    terms: dict[str, None] = {}
    if limit <= 0:
        return []
    for m in _TOKEN.finditer(fold(query).lower()):
        w = m.group(0)
        if _IS_HAN.match(w):
            grams = [w] if len(w) == 1 else [w[i : i + 2] for i in range(len(w) - 1)]
        elif len(w) >= 2 and w not in STOP_WORDS:
            grams = [w]
        else:
            grams = []
        for g in grams:
            terms.setdefault(g, None)
            if len(terms) >= limit:
                return list(terms)
    return list(terms)


def _fts_phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


# engine -> {index name: backend}: a store creates (or checks) each index once per process
_CREATED: weakref.WeakKeyDictionary[Engine, dict[str, str]] = weakref.WeakKeyDictionary()
_CREATED_LOCK = threading.Lock()


class KeywordIndex:
    """A full-text index over ``(ref, namespace, text)`` rows of one source table.

    ``name`` names the FTS5 table on SQLite; ``source`` is the table the rows come from,
    with ``ref_column`` (its key), ``namespace`` and ``doc_sql`` (the SQL of its searchable
    text), used to fill a new index and by the PostgreSQL and LIKE backends. ``documents``
    yields the source's ``(ref, namespace, text)`` rows to fill a new FTS5 table.
    """

    def __init__(self, engine: Engine, name: str, *, source: str, ref_column: str, doc_sql: str,
                 documents: Callable[[Connection], Iterable[tuple[Any, str, str]]],
                 replaces: Sequence[str] = ()) -> None:
        self.engine = engine
        self.name = name
        self.source = source
        self.ref_column = ref_column
        self.doc_sql = doc_sql
        self._df: dict[str, int] = {}
        self._df_total: int | None = None
        with _CREATED_LOCK:
            known = _CREATED.setdefault(engine, {})
            if name not in known:
                known[name] = self._create(documents, replaces)
            self.backend = known[name]

    def _create(self, documents: Callable[[Connection], Iterable[tuple[Any, str, str]]], replaces: Sequence[str]) -> str:
        dialect = self.engine.dialect.name
        if dialect == "postgresql":
            with self.engine.begin() as conn:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": 0x6D656D6F73})
                conn.execute(text(f"CREATE INDEX IF NOT EXISTS {self.name}_tsv_folded ON {self.source} "
                                  f"USING gin ({self._tsvector()})"))
                conn.execute(text(f"DROP INDEX IF EXISTS {self.name}_tsv"))  # the index of the unfolded text
            return "postgres"
        if dialect != "sqlite":
            return "like"
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("BEGIN IMMEDIATE")  # one process creates and fills it
                new = not conn.execute(text("SELECT 1 FROM sqlite_master WHERE name = :n"), {"n": self.name}).first()
                conn.execute(text(f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.name} USING fts5("
                                  "namespace UNINDEXED, ref UNINDEXED, body, tokenize='unicode61 remove_diacritics 0')"))
                conn.execute(text(f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.name}_vocab USING fts5vocab({self.name}, 'row')"))
                if new:  # an older store: its rows are indexed once, and the index it had is dropped
                    rows = [{"ns": ns, "ref": str(ref), "body": index_text(body)} for ref, ns, body in documents(conn)]
                    if rows:
                        conn.execute(text(f"INSERT INTO {self.name}(namespace, ref, body) VALUES (:ns, :ref, :body)"), rows)
                    for old in replaces:
                        conn.execute(text(f"DROP TABLE IF EXISTS {old}"))
                conn.commit()
            return "fts5"
        except OperationalError as exc:  # SQLite built without FTS5
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            return "like"

    # -- writes (in the caller's transaction) ---------------------------------------

    def add(self, session: Session, rows: Iterable[tuple[Any, str, str]]) -> None:
        """Index ``(ref, namespace, text)`` rows (PostgreSQL and LIKE read the source table)."""
        if self.backend != "fts5":
            return
        batch = [{"ns": ns, "ref": str(ref), "body": index_text(body)} for ref, ns, body in rows]
        if batch:
            session.execute(text(f"INSERT INTO {self.name}(namespace, ref, body) VALUES (:ns, :ref, :body)"), batch)

    def remove(self, session: Session, refs: Iterable[Any]) -> None:
        """Drop the rows with these refs from the index."""
        if self.backend != "fts5":
            return
        keys = [str(r) for r in refs]
        delete = text(f"DELETE FROM {self.name} WHERE ref IN :refs").bindparams(bindparam("refs", expanding=True))
        for i in range(0, len(keys), _DELETE_BATCH):  # ref is not indexed: each statement reads the table once
            session.execute(delete, {"refs": keys[i : i + _DELETE_BATCH]})

    def remove_namespaces(self, session: Session, namespace: str) -> None:
        """Drop every row of ``namespace`` and of the namespaces below it (``namespace/...``)."""
        if self.backend != "fts5":
            return
        like = namespace.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
        session.execute(text(f"DELETE FROM {self.name} WHERE namespace = :ns OR namespace LIKE :like ESCAPE '\\'"),
                        {"ns": namespace, "like": like})

    def optimize(self, conn: Connection) -> None:
        """Merge the index's segments (old segments still hold the terms of deleted rows)."""
        if self.backend == "fts5":
            conn.execute(text(f"INSERT INTO {self.name}({self.name}) VALUES ('optimize')"))

    # -- search ----------------------------------------------------------------------

    def search(self, session: Session, namespace: str, query: str, n: int, *, where: str = "") -> list[str]:
        """Refs of the ``n`` best rows of ``namespace`` for ``query``, best first. ``where``
        is an extra SQL condition on the source table (PostgreSQL and LIKE only; with FTS5
        the caller filters what comes back)."""
        terms = query_terms(query)
        for other in both_scripts(query)[1:]:  # the other script's character pairs, after the query's own
            terms += [t for t in query_terms(other) if t not in terms]
        if not terms or n <= 0:
            return []
        if self.backend == "fts5":
            match = " OR ".join(_fts_phrase(t) for t in self._selective(session, terms))
            rows = session.execute(text(f"SELECT ref FROM {self.name} WHERE {self.name} MATCH :q AND namespace = :ns "
                                        f"ORDER BY bm25({self.name}) LIMIT :k"), {"q": match, "ns": namespace, "k": n})
            return [str(r[0]) for r in rows]
        extra = f" AND {where}" if where else ""
        if self.backend == "postgres":
            words = [t for t in terms if not _IS_HAN.search(t)]
            refs: list[str] = []
            if words:
                parts = [f"plainto_tsquery('simple', :t{i})" for i in range(len(words))]
                tsq = "(" + " || ".join(parts) + ")"
                doc = self._tsvector()
                q = text(f"SELECT {self.ref_column} FROM {self.source} WHERE namespace = :ns{extra} AND {doc} @@ {tsq} "
                         f"ORDER BY ts_rank_cd({doc}, {tsq}) DESC, {self.ref_column} LIMIT :k")
                params: dict[str, Any] = {f"t{i}": t for i, t in enumerate(words)}
                refs = [str(r[0]) for r in session.execute(q, {**params, "ns": namespace, "k": n})]
            grams = [t for t in terms if _IS_HAN.search(t)]  # PostgreSQL's parser keeps a Han run as one word
            if grams:
                refs += [r for r in self._like(session, namespace, grams, n, extra) if r not in refs]
            return refs[:n]
        return self._like(session, namespace, terms, n, extra)

    def _like(self, session: Session, namespace: str, terms: Sequence[str], n: int, extra: str) -> list[str]:
        conds = " OR ".join(f"lower({self.doc_sql}) LIKE :t{i}" for i in range(len(terms)))
        params: dict[str, Any] = {f"t{i}": f"%{t}%" for i, t in enumerate(terms)}
        rows = session.execute(text(f"SELECT {self.ref_column}, {self.doc_sql} FROM {self.source} "
                                    f"WHERE namespace = :ns{extra} AND ({conds})"), {**params, "ns": namespace})
        ranked = sorted(rows, key=lambda r: -sum(t in str(r[1]).lower() for t in terms))
        return [str(r[0]) for r in ranked[:n]]

    def _tsvector(self) -> str:
        """PostgreSQL's words of a row: of its text folded as :func:`tokens` folds it, with a
        space between Han characters and letters or digits (its parser reads "订单号是ORD-88123"
        as one word). The same expression in the index and in each query, so the index serves them."""
        src, dst = FOLD_TABLE
        han = f"[{_HAN}]"
        folded = f"translate({self.doc_sql}, '{src}', '{dst}')"
        spaced = (f"regexp_replace(regexp_replace({folded}, '({han})([A-Za-z0-9])', '\\1 \\2', 'g'), "
                  f"'([A-Za-z0-9])({han})', '\\1 \\2', 'g')")
        return f"to_tsvector('simple', {spaced})"

    def _selective(self, session: Session, terms: list[str]) -> list[str]:
        """The terms worth matching (see the module docs); document frequencies are cached
        until the index has grown by a tenth."""
        total = session.execute(text(f"SELECT max(rowid) FROM {self.name}")).scalar() or 0
        if self._df_total is None or total - self._df_total > max(500, self._df_total // 10):
            self._df.clear()
            self._df_total = total
        df = {}  # read from here: another thread may clear the cache meanwhile
        for t in terms:
            known = self._df.get(t)
            if known is None:
                # a term that FTS5 splits (ord-12345) is a phrase: as common as its rarest part
                parts = [p for p in re.split(r"[^\w]+", t) if p][:_MAX_PARTS] or [t]
                counts = []
                for p in parts:
                    row = session.execute(text(f"SELECT doc FROM {self.name}_vocab WHERE term = :t"), {"t": p}).first()
                    counts.append(int(row[0]) if row else 0)
                known = self._df[t] = min(counts)
            df[t] = known
        limit = max(200, int((self._df_total or 0) * 0.02))
        kept = [t for t in terms if df[t] <= limit]
        return kept or [min(terms, key=lambda t: df[t])]
