"""A checked search in one C call: the loadable extension's simhash_near_verdicts, loaded into the index's own
connection, fingerprints and sketches the query, probes the block indexes, reads the matches' rows and judges
every candidate by the rule (sqlite_extension.c rule_judge, its numbers generated from core/rule.py; a table
of cases keeps it equal to verdict.decide, tests/test_extension_rule.py). One C core, two faces: simq near
and simhash_near in any SQLite host run the same code.

Why: at small k a query's own work is some tens of microseconds, and the numpy path (search.Searcher.within,
check.check_candidates) spends several times that in Python on arrays of a few items (bench/near_k.py: 7.3x
the extension at k 3, 3.4x at k 7). That path stays the reference and the fallback, and answers wherever
this one cannot answer the same: the C core off (SIMHASH_SQLITE_CORE=python, or not built), the extension
not built or built without zlib, settings the core does not compute (features "words"), a query by key, a
threshold other than the default, a scan (the planner's choice, with its arrays kept between queries), and
a text the core declines. The extension never reads files: a candidate judged without its text whose file
may hold it (its row stores no text but a content hash) is judged again here by verdict.judge with the
text read as the reference reads it (check.ShingleCache). tests/test_native_near.py compares both paths.
"""

from __future__ import annotations

import time
from typing import Any

import apsw

from ..core.fingerprint import to_signed
from ..core.rule import CERTAIN
from ..core.settings import DEFAULT_THRESHOLD
from ..core.shingles import jaccard_of_sets, shingle_set
from ..errors import InvalidInput
from ..store import texts
from .check import ShingleCache
from .queries import Query
from .quick_near import ENTRY_POINT, VERDICTS_SQL, load_verdicts  # noqa: F401 (ENTRY_POINT: importable here)
from .search import Match, Plan, SearchResult
from .verdict import CheckSummary, judge

NO_FEATURES = "the query text has no features (no letters or digits) to search with"
_MASK64 = (1 << 64) - 1


class NativeNear:
    """simhash_near_verdicts on one connection, loaded on first use; usable() says whether it answers here
    (decided once: SIMHASH_SQLITE_CORE is read when the index first searches, not at every query)."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._usable: bool | None = None

    def usable(self) -> bool:
        if self._usable is None:
            self._usable = self._load()
        return self._usable

    def _load(self) -> bool:
        return load_verdicts(self.conn)

    def search(
        self, query: Query, k: int, threshold: float, limit: int | None, plan: Plan, shingles: ShingleCache
    ) -> SearchResult | None:
        """The checked search of a text or a fingerprint by the probes of `plan`, or None where the reference
        path must answer (see the module's docstring). shingles: the search's check.ShingleCache."""
        text = query.text
        if query.key is not None or (text is None) == (query.fingerprint is None):  # the reference says what is wrong
            return None
        if threshold != DEFAULT_THRESHOLD or plan.kind == "scan" or not self.usable():
            return None
        argument = text if text is not None else to_signed(query.fingerprint)  # type: ignore[arg-type]
        try:
            rows: list[Any] = self.conn.execute(VERDICTS_SQL, (argument, k)).fetchall()
        except apsw.SQLError:  # settings the core does not compute (features "words"): the reference, from now on
            self._usable = False
            return None
        started = time.perf_counter()
        _, read, fingerprint, _, _, _, status, _ = rows[0]
        if status == 0:  # the core declined the text: the reference computes it
            return None
        if status == 2:
            raise InvalidInput(NO_FEATURES)
        fingerprint &= _MASK64
        report = CheckSummary(k, threshold)
        if text is None:
            report.without_query_text = len(rows) - 1
        matches: list[Match] = []
        own: list = []  # the query's shingles, once a file gives a candidate's text
        for key, distance, stored, jaccard, how, certainty, keep, elsewhere in rows[1:]:
            if elsewhere and text is not None and shingles.may_read(key):
                theirs = shingles(key)
                if theirs is not None:
                    if not own:
                        own.append(shingle_set(text) if len(text) <= texts.READ_WHOLE_BYTES else None)
                    if own[0] is not None:
                        exact = jaccard_of_sets(own[0], theirs)
                        again = judge(distance, estimate=jaccard if how == "estimated" else None, sure=certainty,
                                      exact=lambda: exact, threshold=threshold, k=k)
                        jaccard, how, certainty, keep = again.jaccard, again.checked_by, again.certainty, again.keeps
            report.count_one(bool(keep), how, certainty)
            if keep or certainty is None or certainty < CERTAIN:
                matches.append(Match(key, stored & _MASK64, distance, jaccard, how, certainty, bool(keep)))
        matches.sort(key=lambda m: (m.distance, m.key))
        kept = [m for m in matches if m.keeps]
        report.check_seconds = time.perf_counter() - started
        return SearchResult(fingerprint, plan, read, kept if limit is None else kept[:limit], report,
                            [m for m in matches if m.certainty is None or m.certainty < CERTAIN])
