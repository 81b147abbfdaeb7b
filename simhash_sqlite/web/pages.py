"""What the web pages show, computed from an index: a search answered as `simq near` answers it, the
clusters and their members, and two documents side by side with their differences marked.

Plain functions of a SimhashIndex returning dataclasses; no web framework here (datasette_plugin.py
renders them). Only keys the index holds are ever read, so a query string cannot name another file.
"""

from __future__ import annotations

import base64
import difflib
import os
import re
from dataclasses import dataclass, field
from typing import cast

from ..analysis.calibrate import calibrate
from ..analysis.explain import Explanation, explain, verdicts
from ..core.fingerprint import to_hex
from ..core.settings import DEFAULT_THRESHOLD
from ..errors import InvalidInput
from ..find.chains import MemberVerdict, cluster_members
from ..find.clusters import candidates_text, clustering_info
from ..find.verdict import CheckSummary
from ..index import SimhashIndex
from ..store.texts import key_path, source_of
from .plots import SizeBand, cluster_sizes, distance_distribution, distance_png, size_bands

# An uploaded file or pasted text larger than this is refused (the page holds it in memory).
MAX_QUERY_BYTES = 32 << 20
# Texts longer than this are cut for the side-by-side view (the distance and Jaccard use all of it).
SHOWN_CHARS = 200_000
# Blocks of changed lines longer than this (in tokens) are marked whole instead of word by word:
# difflib's matching is quadratic in the worst case.
WORD_DIFF_TOKENS = 4000
CLUSTERS_PER_PAGE = 50
MEMBERS_SHOWN = 200

# Words of letters and digits; CJK characters one by one (no spaces separate their words).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|\s+|[^\w\s]")


def query_text(raw: bytes) -> str:
    """An uploaded file's text: UTF-8, not binary (as `simq near --file` reads a file)."""
    if len(raw) > MAX_QUERY_BYTES:
        raise InvalidInput(f"the file is larger than {MAX_QUERY_BYTES >> 20} MiB")
    if b"\x00" in raw[:8192]:
        raise InvalidInput("the file is binary (NUL bytes), not text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the file is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None


# -- search --------------------------------------------------------------------------------------


# How a match was judged (Match.checked_by), in words.
CHECKS = {
    "exact": "exact Jaccard",
    "estimated": "estimated Jaccard (stored sketch)",
    "distance": "distance only (text out of reach)",
    None: "not checked",
}


@dataclass(frozen=True)
class SearchRow:
    key: str
    distance: int
    similarity: float
    jaccard: float | None  # the Jaccard the check measured or estimated; None when judged by distance alone
    check: str  # how it was judged, in words (CHECKS)
    fingerprint: str  # hex
    certainty: float | None = None  # how sure the verdict is; None: by distance, or unchecked
    keeps: bool = True  # the verdict (the uncertain filter lists both kinds)


@dataclass(frozen=True)
class SearchAnswer:
    rows: list[SearchRow]
    k: int
    fingerprint: str  # the query's, hex
    plan: str
    candidates: int  # rows the plan read
    report: CheckSummary | None  # None: not checked
    uncertain: bool = False  # the rows are the uncertain verdicts, kept or not


def search(
    index: SimhashIndex,
    text: str | None = None,
    *,
    key: str | None = None,
    k: int | None = None,
    check: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    limit: int | None = None,
    uncertain: bool = False,
) -> SearchAnswer:
    """The answer of `simq near` (a text or --key), with its defaults: index.search(). uncertain: the
    candidates whose verdict is uncertain instead (kept or not), to review."""
    result = index.search(text, key=key, k=k, limit=None if uncertain else limit, check=check, threshold=threshold)
    matches = result.uncertain if uncertain else result.matches
    rows = [
        SearchRow(m.key, m.distance, m.similarity, m.jaccard, CHECKS.get(m.checked_by, str(m.checked_by)),
                  to_hex(m.fingerprint), m.certainty, m.keeps)
        for m in matches
    ]
    return SearchAnswer(rows, result.plan.k, to_hex(result.fingerprint), result.plan.describe(), result.candidates,
                        result.report, uncertain)


# -- clusters ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterRow:
    cluster: int
    size: int
    representative: str


@dataclass(frozen=True)
class ClustersPage:
    info: dict | None  # the last clustering run (k, jaccard, representative, documents, at, stale); None: never
    total: int  # clusters of two or more documents
    rows: list[ClusterRow]  # this page of them, largest first
    bands: list[SizeBand]
    page: int
    pages: int

    @property
    def made_with(self) -> str:
        """How the clustering run's candidate pairs were made, in words."""
        return "" if self.info is None else candidates_text(self.info)

    @property
    def most_documents(self) -> int:
        """The most documents in one band of clusters of two or more: the bars' full length."""
        return max((band.documents for band in self.bands if band.low > 1), default=1)


def clusters_page(index: SimhashIndex, page: int = 1, per_page: int = CLUSTERS_PER_PAGE) -> ClustersPage:
    """Clusters of two or more documents, largest first, from the table the last `simq clusters` wrote."""
    conn = index.conn
    info = clustering_info(conn)
    total = conn.execute("SELECT count(*) FROM clusters WHERE id = cluster AND size > 1").get
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    rows = cast(list[tuple[int, int, str]], conn.execute(
        """SELECT c.cluster, c.size, r.key FROM clusters c JOIN documents r ON r.id = c.representative
           WHERE c.id = c.cluster AND c.size > 1 ORDER BY c.size DESC, c.cluster LIMIT ? OFFSET ?""",
        (per_page, (page - 1) * per_page),
    ).fetchall())
    return ClustersPage(info, total, [ClusterRow(*row) for row in rows], size_bands(cluster_sizes(conn)), page, pages)


@dataclass(frozen=True)
class ClusterView:
    cluster: int
    size: int
    representative: str
    members: list[MemberVerdict]  # the first MEMBERS_SHOWN, in the order added, with their verdicts
    info: dict | None

    @property
    def below(self) -> list[MemberVerdict]:
        """Members the check does not keep against the representative: joined through others."""
        return [m for m in self.members if m.below]


def cluster_view(index: SimhashIndex, cluster: int, shown: int = MEMBERS_SHOWN) -> ClusterView:
    """One cluster's members with their distance and verdict against the representative (check.judge,
    as simq dupes and explain give it), and the chain of kept pairs that joined those below it."""
    size, rep, members = cluster_members(index, cluster, shown)
    return ClusterView(cluster, size, rep, members, clustering_info(index.conn))


# -- two documents side by side ------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    text: str
    changed: bool  # not in the other document at this place


@dataclass(frozen=True)
class PairView:
    explanation: Explanation
    verdicts: list[tuple[str, str]]  # (rule, what it says), as `simq explain` prints them
    left: list[Segment] = field(default_factory=list)  # empty without both texts
    right: list[Segment] = field(default_factory=list)
    cut: bool = False  # a text was longer than SHOWN_CHARS and is shown in part
    missing: list[tuple[str, str]] = field(default_factory=list)  # (key, why its text is out of reach)


def pair_view(index: SimhashIndex, a: str, b: str) -> PairView:
    """Two stored documents compared as `simq explain` compares them, their texts side by side.

    Both must be keys of the index: unlike `simq explain`, a name that is not a key is refused rather
    than read as a file path."""
    for key in (a, b):
        if index.get(key) is None:
            raise InvalidInput(f"{key!r} is not a key in this index")
    e = explain(index, a, b)
    missing = [(side.name, missing_text_reason(index, side.name)) for side in (e.a, e.b) if side.text is None]
    ta, tb = e.a.text, e.b.text
    if ta is None or tb is None:  # (missing)
        return PairView(e, verdicts(e), missing=missing)
    cut = len(ta) > SHOWN_CHARS or len(tb) > SHOWN_CHARS
    left, right = side_by_side(ta[:SHOWN_CHARS], tb[:SHOWN_CHARS])
    return PairView(e, verdicts(e), left, right, cut)


def missing_text_reason(index: SimhashIndex, key: str) -> str:
    """Why a stored key's text cannot be shown."""
    where = "the index does not store texts" if not index.store_text else "its text was not stored"
    source = source_of(index, key)
    if source is not None:
        return f"{where}, and its line in {source} has changed since it was indexed, or the file is gone"
    path = key_path(key, index.key_root)
    if os.path.isfile(path):
        return f"{where}, and the file {path} has changed since it was indexed"
    return f"{where}, and there is no file {path} any more (moved, deleted, or the key is not a path)"


def side_by_side(a: str, b: str) -> tuple[list[Segment], list[Segment]]:
    """Both texts cut into segments, those not in the other text marked changed: lines matched first,
    then the words (CJK characters) within changed lines."""
    lines_a, lines_b = a.splitlines(keepends=True), b.splitlines(keepends=True)
    left: list[Segment] = []
    right: list[Segment] = []
    matcher = difflib.SequenceMatcher(None, lines_a, lines_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        part_a, part_b = "".join(lines_a[i1:i2]), "".join(lines_b[j1:j2])
        if tag == "equal":
            _append(left, part_a, False)
            _append(right, part_b, False)
        elif tag == "replace":
            _word_diff(part_a, part_b, left, right)
        else:
            _append(left, part_a, True)
            _append(right, part_b, True)
    return left, right


def _word_diff(a: str, b: str, left: list[Segment], right: list[Segment]) -> None:
    tokens_a, tokens_b = _TOKEN.findall(a), _TOKEN.findall(b)
    if len(tokens_a) > WORD_DIFF_TOKENS or len(tokens_b) > WORD_DIFF_TOKENS:
        _append(left, a, True)
        _append(right, b, True)
        return
    matcher = difflib.SequenceMatcher(None, tokens_a, tokens_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        _append(left, "".join(tokens_a[i1:i2]), tag != "equal")
        _append(right, "".join(tokens_b[j1:j2]), tag != "equal")


def _append(segments: list[Segment], text: str, changed: bool) -> None:
    """Add text, merged into the last segment when it is marked the same."""
    if not text:
        return
    if segments and segments[-1].changed == changed:
        segments[-1] = Segment(segments[-1].text + text, changed)
    else:
        segments.append(Segment(text, changed))


# -- calibration -----------------------------------------------------------------------------------


def calibration_view(index: SimhashIndex) -> dict:
    """What simq calibrate measures, with its chart (a PNG, base64)."""
    result = calibrate(index)
    dist = distance_distribution(index, result)
    image = base64.b64encode(distance_png(dist)).decode("ascii")
    return {"calibration": result, "distribution": dist, "png": image}
