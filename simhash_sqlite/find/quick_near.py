"""A checked search of a stored key or a text with neither numpy nor SimhashIndex: the loadable extension's
simhash_near_verdicts on a read-only connection, for `simq near`'s start-up (quick/lane.py; numpy alone was a
third of a search's instructions, bench/startup.py).

The same answer as SimhashIndex.search or not at all: search() returns None wherever the reference (or
native_near) must answer, and the caller runs it. A key is searched as the text the reference would check it
by (check.ShingleCache: the stored text, an unchanged file, a JSONL line, else a short text's exact data), and
only where the C core makes from that text the key's own stored fingerprint and sketch: then the extension's
query is the reference's query (its verdicts are find/verdict.decide()'s rule, generated from core/rule.py),
and the key's own row is left out as the reference leaves it out. None for: the C core or the extension
unavailable, an index the extension refuses or settings it does not compute, a text it declines, a row
without a sketch or a text at hand, a text too long to read whole, a text the C core declines, and any error
(the reference says it in its words). A candidate the extension judged without its text, which a JSONL line
or a file holds, is judged again as native_near judges it: the exact Jaccard of both texts' shingles (made
by the C core as the extension's own check makes them) through the extension's rule, without numpy.
"""

from __future__ import annotations

import ctypes
import functools
import json
import math
import os
from dataclasses import dataclass
from typing import Any

import apsw

from .. import native
from ..core.rule import READ_WHOLE_BYTES, TRUTH_NGRAM
from ..core.settings import DEFAULT_THRESHOLD, FingerprintSettings
from ..core.shingles import jaccard_of_counts
from ..core.short_texts import short_text_of
from ..errors import SimhashError
from ..native.extension import ExtensionMissing, built_without, loadable_path
from ..store.database import connect
from ..store.documents import ShortTexts
from ..store.texts import TextReader, key_path
from .match import Match
from .summary import CHECKED_BY, CheckSummary

ENTRY_POINT = "sqlite3_simhash_package_init"  # registers simhash_near_verdicts only
VERDICTS_SQL = (
    "SELECT key, distance, fingerprint, jaccard, checked_by, certainty, keep, elsewhere "
    "FROM simhash_near_verdicts(?, ?)"
)
# The extension probes the block indexes; past this k (radius 4: 9,000+ probes) the reference plans a scan.
MOST_K = 15
_MASK64 = (1 << 64) - 1
_SKETCH_FIELDS = frozenset({"bins", "bits", "ngram", "version", "size_bits"})
_DECLINED = object()


def _rule(distance: int, k: int, estimate: float | None, sure: float | None, exact: float) -> tuple:
    """verdict.judge(distance, estimate=, sure=, exact=) by the extension's rule (simhash_test_rule: the
    rule_judge its search calls, generated from core/rule.py; tests/test_extension_rule.py holds it to
    verdict.judge): (jaccard, checked_by, certainty, keep)."""
    judged, certainty = ctypes.c_double(), ctypes.c_double()
    got = _rule_function()(distance, k, estimate is not None, estimate or 0.0, math.nan if sure is None else sure,
                           1, exact, ctypes.byref(judged), ctypes.byref(certainty))
    none = (lambda x: None if math.isnan(x) else x)  # noqa: E731
    # (got: keep | how << 1, how 1 exact, 2 estimated, 3 distance: CHECKED_BY's order from 1)
    return none(judged.value), CHECKED_BY[(got >> 1) - 1], none(certainty.value), bool(got & 1)


@functools.lru_cache(maxsize=1)
def _rule_function() -> Any:
    function = ctypes.CDLL(loadable_path()).simhash_test_rule
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_int,
                         ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
    return function


def load_verdicts(conn: apsw.Connection) -> bool:
    """Load the extension's package entry point (simhash_near_verdicts) into conn; False where it cannot
    answer as the reference would (the C core off or not built, the extension not built or built without
    zlib: short texts would be estimated where the package reads them)."""
    try:
        if native.core() is None:
            return False
        if built_without():
            return False
        path = loadable_path()
    except (native.NativeUnavailable, ExtensionMissing):
        return False
    try:
        conn.enable_load_extension(True)
        conn.load_extension(path, ENTRY_POINT)
    except apsw.Error:
        return False
    finally:
        conn.enable_load_extension(False)
    return True


@dataclass
class QuickAnswer:
    """What SimhashIndex.search answers, less the plan: the kept matches (closest first, at most limit) and
    the check's counts."""

    matches: list[Match]
    report: CheckSummary


@dataclass
class _IndexFile:
    """What store.texts.TextReader reads of an index (store.database.IndexFile)."""

    conn: apsw.Connection
    short_texts: ShortTexts
    key_root: str | None
    store_text: bool
    sketch_scheme: Any = None  # (not read by TextReader)


class QuickIndex:
    """An index opened read-only for quick searches; open() gives None where it is not one to search
    quickly (the caller opens SimhashIndex, which says what is wrong, if anything)."""

    def __init__(self, conn: apsw.Connection, path: str, meta: dict[str, str]) -> None:
        self.conn, self.path, self.meta = conn, path, meta
        self.key_root = meta.get("key_root")
        column = any(row[1] == "short_text" for row in conn.execute("PRAGMA table_info(documents)"))
        self.texts = TextReader(_IndexFile(conn, ShortTexts(kept="short_texts" in meta and column, column=column),
                                           self.key_root, meta.get("store_text") == "1"))

    @classmethod
    def open(cls, path: str) -> QuickIndex | None:
        try:
            conn = connect(path, create=False, readonly=True)
        except (SimhashError, apsw.Error, OSError):
            return None
        try:
            meta = dict(conn.execute("SELECT key, value FROM simhash_meta"))
            root = meta.get("key_root")
            if ("fingerprint" not in meta or "sketch" not in meta  # never finished; made before sketches
                    or (root is not None and (not os.path.isabs(root) or "\x00" in root))  # store.meta refuses it
                    or not load_verdicts(conn)):
                conn.close()
                return None
            return cls(conn, path, meta)
        except (SimhashError, apsw.Error, OSError, ValueError):
            conn.close()
            return None

    def close(self) -> None:
        self.texts.close()
        self.conn.close()

    def __enter__(self) -> QuickIndex:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def search(self, *, key: str | None = None, text: str | None = None, k: int, limit: int | None = None,
               threshold: float = DEFAULT_THRESHOLD) -> QuickAnswer | None:
        """SimhashIndex.search(text or key=key, k=k, limit=limit) with the check at the default threshold, or
        None where the reference must answer."""
        if (key is None) == (text is None) or threshold != DEFAULT_THRESHOLD or not 0 <= k <= MOST_K:
            return None
        try:
            if key is not None:
                text = self._text_of_key(key)
                if text is None:
                    return None
            assert text is not None
            return self._judged(text, key, k, limit)
        except (SimhashError, apsw.Error, OSError, ValueError):
            return None

    def fingerprint(self, text: str) -> int | None:
        """SimhashIndex.fingerprint(text) with the index's settings, by the extension (the query's row of
        simhash_near_verdicts at k 0); None where the reference must answer (declined, no features, an error)."""
        try:
            rows: list[Any] = self.conn.execute(VERDICTS_SQL, (text, 0)).fetchall()
        except apsw.Error:
            return None
        return rows[0][2] & _MASK64 if rows and rows[0][6] == 1 else None

    def _text_of_key(self, key: str) -> str | None:
        """The text the reference checks the key by, where the C core makes the key's stored fingerprint and
        sketch from it (so the extension's query is the reference's); else None."""
        row = self.conn.execute(
            "SELECT fingerprint, sketch FROM documents WHERE key = ?", (key,)
        ).fetchall()
        if len(row) != 1 or not isinstance(row[0][0], int) or not isinstance(row[0][1], bytes):
            return None  # unknown key, no features, no sketch: the reference's words or its distance rule
        stored, sketch = row[0][0] & _MASK64, row[0][1]
        found = self.texts.row(key)
        if found is None:
            return None
        text, short = found
        if text is None and short is not None:
            text = short_text_of(short)  # ValueError where damaged: the reference estimates
        if text is None or len(text) > READ_WHOLE_BYTES:
            return None
        lib = native.core()
        settings = FingerprintSettings.from_json(self.meta["fingerprint"])
        scheme = self._scheme()
        if lib is None or scheme is None or not native.supports(settings):
            return None
        made, made_sketch, status = native.fingerprint_one(lib, text, ngram=settings.ngram, weights=settings.weights,
                                                           scheme=scheme)
        if status & native.DECLINED or not status & native.HAS_FINGERPRINT or not status & native.HAS_SKETCH:
            return None
        return text if made == stored and made_sketch == sketch else None

    def _scheme(self) -> native._Scheme | None:
        """The recorded sketch scheme as the C core takes it (None: not one it reads plainly)."""
        info = json.loads(self.meta["sketch"])
        if not isinstance(info, dict) or not set(info) <= _SKETCH_FIELDS or not all(
            isinstance(info.get(name), int) for name in ("bins", "bits")
        ):
            return None
        return native._Scheme(info["bins"], info["bits"], info.get("size_bits", 0))

    def _judged(self, text: str, key: str | None, k: int, limit: int | None) -> QuickAnswer | None:
        rows: list[Any] = self.conn.execute(VERDICTS_SQL, (text, k)).fetchall()
        if not rows or rows[0][6] != 1:  # declined, or no features: the reference computes or refuses it
            return None
        report = CheckSummary(k, DEFAULT_THRESHOLD)
        matches: list[Match] = []
        own: list[list[int] | None] = []  # the query's shingles, once a line or file gives a candidate's text
        for found, distance, fingerprint, jaccard, how, certainty, keep, elsewhere in rows[1:]:
            if found == key:  # the key's own document (the reference leaves it out: exclude=key)
                continue
            if elsewhere and self._may_read(found):  # judged again with its text, as native_near does
                again = self._judged_again(text, own, found, distance, jaccard, how, certainty, k)
                if again is _DECLINED:
                    return None
                if again is not None:
                    jaccard, how, certainty, keep = again
            report.count_one(bool(keep), how, certainty)
            if keep:
                matches.append(Match(found, fingerprint & _MASK64, distance, jaccard, how, certainty, True))
        matches.sort(key=lambda m: (m.distance, m.key))
        return QuickAnswer(matches if limit is None else matches[:limit], report)

    def _judged_again(self, text: str, own: list, found: str, distance: int, jaccard: float | None, how: str,
                      certainty: float | None, k: int) -> Any:
        """native_near's second judgement of a candidate the extension judged without its text: the exact
        Jaccard of the query's and the candidate's shingles (check.ShingleCache's texts: a JSONL line, an
        unchanged file, else a short text's data), given to the extension's rule. (jaccard, checked_by,
        certainty, keep); None where no text is at hand (the first verdict stands); _DECLINED where the C core
        declines a text (the reference answers)."""
        lib = native.core()
        row = self.texts.row(found)
        if lib is None or row is None:
            return None
        theirs_text, short = row
        if theirs_text is None:
            if short is None:
                return None
            try:
                theirs_text = short_text_of(short)
            except ValueError:  # damaged: core/short_texts.short_text_shingles gives none
                return None
        theirs = native.text_shingles(lib, theirs_text, TRUTH_NGRAM)
        if not own:
            own.append(native.text_shingles(lib, text, TRUTH_NGRAM) if len(text) <= READ_WHOLE_BYTES else False)
        if own[0] is False:  # too long to shingle whole: the first verdict stands
            return None
        if theirs is None or own[0] is None:
            return _DECLINED
        smaller, larger = sorted((own[0], theirs), key=len)
        shared = len(set(smaller).intersection(larger))
        return _rule(distance, k, jaccard if how == "estimated" else None, certainty,
                     jaccard_of_counts(shared, len(own[0]), len(theirs)))

    def _may_read(self, key: str) -> bool:
        """check.ShingleCache.may_read: its JSONL line recorded, or a file at the key's path."""
        if self.texts.has_line(key):
            return True
        path = key_path(key, self.key_root)
        return os.access(path, os.F_OK) and os.path.isfile(path)

