"""Clusters: connected components of the near-duplicate graph (A~B and B~C put A, B, C together),
computed with a vectorized union-find and written back to the index's `clusters` table."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import apsw
import numpy as np

from ..core.settings import validate_k
from ..errors import InvalidArgument, InvalidMetadata
from ..store.database import read_only, write_transaction
from ..store.labels import apart_ids, keeper_ids
from ..store.meta import REPRESENTATIVE_RULES, clusters_record_problem
from .arrays import load_fingerprints
from .pairs import CHUNK, Progress, as_unsigned, distinct_pairs, fold
from .verdict import CheckSummary

# Which member represents (is kept for) a cluster. Ties always go to the lowest id.
# Union the pairs of distinct fingerprints this many at a time.
UNION_BATCH = 4 * CHUNK
INSERT_BATCH = 100_000


def _compress(parent: np.ndarray) -> None:
    """Pointer jumping until every node points at its root (path lengths halve each round)."""
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            return
        parent[:] = grand


def _roots(parent: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The root of each node, halving the paths walked (each node passed points to its grandparent):
    the work is the pairs' paths, not the whole array, so a batch of pairs costs its own size."""
    at = nodes
    while True:
        up = parent[at]
        grand = parent[up]
        moving = up != grand
        if not moving.any():
            return up
        parent[at[moving]] = grand[moving]  # path halving: any ancestor is still on the way to the root
        at = np.where(moving, grand, up)


def _union(parent: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Join the components of each pair. Roots are hooked under the smaller root, so a root is
    always the lowest node of its component, and no cycle can form. The forest is one int64 array
    over row numbers: 8 bytes a document."""
    while len(a):
        root_a, root_b = _roots(parent, a), _roots(parent, b)
        apart = root_a != root_b
        a, b, root_a, root_b = a[apart], b[apart], root_a[apart], root_b[apart]
        if len(a):
            np.minimum.at(parent, np.maximum(root_a, root_b), np.minimum(root_a, root_b))


def component_labels(fingerprints, k: int, on_progress: Progress | None = None) -> np.ndarray:
    """For each position, the lowest position of its connected component under "within k"."""
    k = validate_k(k)
    folded = fold(as_unsigned(fingerprints))
    parent = np.arange(len(folded.values), dtype=np.int64)  # identical fingerprints: one node
    pending, count = [], 0
    for part in distinct_pairs(folded.values, k, on_progress=on_progress):
        pending.append(part)
        count += len(part.left)
        if count >= UNION_BATCH:
            _union(parent, np.concatenate([p.left for p in pending]), np.concatenate([p.right for p in pending]))
            pending, count = [], 0
    if pending:
        _union(parent, np.concatenate([p.left for p in pending]), np.concatenate([p.right for p in pending]))
    _compress(parent)
    # Values are numbered by first position, so the root's first position is the component's lowest.
    return folded.members[folded.offsets[parent]][folded.value_of()]


@dataclass(frozen=True)
class ClusterReport:
    """What a clustering run found and wrote."""

    k: int
    rule: str
    documents: int  # all documents, those without features included (as clusters of one)
    clusters: int  # clusters, those of one document included
    clustered: int  # documents in clusters of two or more
    largest: int
    check: CheckSummary | None = None  # how the pairs were checked (None: distance alone)
    saved: bool = True  # written to the file; False: the index is read-only, kept in a TEMP table
    candidates: str = "fingerprint"  # how the candidate pairs were made: "sketch" (LSH) or "fingerprint" (within k)
    below: int | None = None  # members the check does not keep against their representative (chains.py)
    chained: dict | None = field(default=None, repr=False)  # cluster -> [(key, Verdict)] of those members

    @property
    def duplicates(self) -> int:
        """Documents that are not their cluster's representative: what deduplication drops."""
        return self.documents - self.clusters


@dataclass(frozen=True)
class Cluster:
    cluster: int  # the lowest document id in it
    size: int
    representative: str  # key
    members: tuple[str, ...]  # keys, in id order (the order they were added)


def _representatives(
    ids: np.ndarray, labels: np.ndarray, lengths: np.ndarray, rule: str, keepers: np.ndarray | None = None
) -> np.ndarray:
    """For each document, the id of its cluster's representative: a keeper (a member a person chose to
    keep) if it has one, else by the rule."""
    primary = {"first": ids, "last": -ids, "longest": -lengths, "shortest": lengths}[rule]
    chosen_first = np.zeros(len(ids), dtype=bool) if keepers is None else ~keepers
    order = np.lexsort((ids, primary, chosen_first, labels))  # by cluster, a keeper, the rule, the lowest id
    head = np.concatenate((np.ones(min(1, len(ids)), dtype=bool), labels[order][1:] != labels[order][:-1]))
    chosen = order[head]  # one document per cluster, clusters in ascending label order
    slot = np.cumsum(head) - 1  # the cluster number of each sorted position
    out = np.empty(len(ids), dtype=np.int64)
    out[order] = ids[chosen][slot]
    return out


def pair_components(
    ids: np.ndarray, pairs: Iterable[tuple[np.ndarray, np.ndarray]], apart: Iterable[tuple[int, int]] = ()
) -> np.ndarray:
    """For each of the ids (ascending), the lowest id of its connected component under the given
    pairs of ids (chunks of (first ids, second ids)).

    apart: pairs of ids that must not end in one component (labelled "not a duplicate"). Pairs touching
    them are joined last, one by one, and a join that would put two such documents together is skipped:
    each of them may still join the rest, but never through a chain to the other."""
    parent = np.arange(len(ids), dtype=np.int64)
    enemies: dict[int, set[int]] = {}
    for x, y in apart:
        px, py = _positions(ids, np.array([x, y], dtype=np.int64)).tolist()
        if px >= 0 and py >= 0 and px != py:
            enemies.setdefault(px, set()).add(py)
            enemies.setdefault(py, set()).add(px)
    guarded = np.zeros(len(ids), dtype=bool)
    guarded[list(enemies)] = True
    deferred: list[tuple[np.ndarray, np.ndarray]] = []
    pending, count = [], 0
    for first, second in pairs:
        a, b = _positions(ids, first), _positions(ids, second)
        known = (a >= 0) & (b >= 0)  # ids removed by another process since `ids` was read are ignored
        a, b = a[known], b[known]
        if enemies:
            touching = guarded[a] | guarded[b]
            deferred.append((a[touching], b[touching]))
            a, b = a[~touching], b[~touching]
        pending.append((a, b))
        count += len(first)
        if count >= UNION_BATCH:
            _union(parent, np.concatenate([a for a, _ in pending]), np.concatenate([b for _, b in pending]))
            pending, count = [], 0
    if pending:
        _union(parent, np.concatenate([a for a, _ in pending]), np.concatenate([b for _, b in pending]))
    _compress(parent)
    if deferred:
        _join_apart(parent, deferred, enemies)
        _compress(parent)
    return ids[parent]


def _join_apart(
    parent: np.ndarray, deferred: list[tuple[np.ndarray, np.ndarray]], enemies: dict[int, set[int]]
) -> None:
    """Join the pairs touching documents kept apart, in position order, unless the join would put two
    documents that must stay apart in one component. Roots stay the lowest position of their component."""
    a = np.concatenate([x for x, _ in deferred])
    b = np.concatenate([y for _, y in deferred])
    order = np.lexsort((b, a))
    members: dict[int, set[int]] = {}  # root -> its guarded members (each guarded one is alone so far)

    def root(x: int) -> int:
        while parent[x] != x:
            x = int(parent[x])
        return x

    for x, y in zip(a[order].tolist(), b[order].tolist()):
        rx, ry = root(x), root(y)
        if rx == ry:
            continue
        mx, my = members.get(rx, {x} if x in enemies else set()), members.get(ry, {y} if y in enemies else set())
        if any(enemies[g] & my for g in mx):
            continue
        low, high = min(rx, ry), max(rx, ry)
        parent[high] = low
        members[low] = mx | my
        members.pop(high, None)


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each wanted id is in the sorted ids, -1 when absent."""
    if len(ids) == 0:
        return np.full(len(wanted), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
    return np.where(ids[at] == wanted, at, -1)


def _ids_and_lengths(conn: apsw.Connection) -> tuple[np.ndarray, np.ndarray]:
    """Every document's id (ascending) and length, as arrays (16 bytes a document, not a list of tuples)."""
    with conn:
        count = conn.execute("SELECT count(*) FROM documents").get
        ids, lengths = np.empty(count, dtype=np.int64), np.empty(count, dtype=np.int64)
        found = conn.execute("SELECT id, coalesce(length, 0) FROM documents ORDER BY id")
        n = 0
        while chunk := list(itertools.islice(found, INSERT_BATCH)):
            ids[n : n + len(chunk)] = [i for i, _ in chunk]
            lengths[n : n + len(chunk)] = [length for _, length in chunk]
            n += len(chunk)
    return ids[:n], lengths[:n]


def cluster_index(
    conn: apsw.Connection,
    k: int,
    representative: str = "first",
    *,
    pairs: Iterable[tuple[np.ndarray, np.ndarray]] | None = None,
    threshold: float | None = None,
    candidates: str = "fingerprint",
    on_progress: Progress | None = None,
) -> ClusterReport:
    """Cluster every indexed document and rewrite the clusters table (one transaction).

    pairs: the edges as chunks of (first ids, second ids), e.g. pairs within k that passed an exact
    check (check.py; `threshold` is then recorded with k, and index.clusters adds how the candidates
    were made: "sketch" for the sketches' LSH tables, "fingerprint" for the pairs within k); None: every
    pair within k, whose search reports to on_progress(done, total)."""
    k = validate_k(k)
    if representative not in REPRESENTATIVE_RULES:
        rules = ", ".join(REPRESENTATIVE_RULES)
        raise InvalidArgument(f"representative must be one of {rules}, not {representative!r}")
    if pairs is None:
        with conn:  # one snapshot for the documents and the fingerprints
            ids, lengths = _ids_and_lengths(conn)
            stored = load_fingerprints(conn)
        labels = ids.copy()  # documents without features are clusters of one
        labels[np.searchsorted(ids, stored.ids)] = stored.ids[component_labels(stored.values, k, on_progress)]
    else:
        ids, lengths = _ids_and_lengths(conn)
        labels = pair_components(ids, pairs, apart_ids(conn))
    slots = np.searchsorted(ids, labels)
    sizes = np.bincount(slots, minlength=len(ids))[slots]
    keepers = np.isin(ids, np.array(keeper_ids(conn), dtype=np.int64))
    reps = _representatives(ids, labels, lengths, representative, keepers)
    # A read-only index (another user's, a read-only folder) is clustered all the same: the result goes
    # to a TEMP table of this connection, which shadows the file's for read_clusters().
    saved = not read_only(conn)
    with write_transaction(conn) if saved else conn:
        if not saved:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS clusters AS SELECT * FROM main.clusters WHERE 0")
        conn.execute("DELETE FROM clusters")
        columns = (ids, labels, sizes, reps)
        for lo in range(0, len(ids), INSERT_BATCH):
            conn.executemany(
                "INSERT INTO clusters (id, cluster, size, representative) VALUES (?, ?, ?, ?)",
                zip(*(c[lo : lo + INSERT_BATCH].tolist() for c in columns)),
            )
        info = {
            "k": k, "jaccard": threshold, "representative": representative, "documents": len(ids),
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "candidates": candidates,
        }
        if saved:
            conn.execute(
                "INSERT INTO simhash_meta (key, value) VALUES ('clusters', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (json.dumps(info),),
            )
    heads = ids == labels
    return ClusterReport(
        k=k,
        rule=representative,
        documents=len(ids),
        clusters=int(heads.sum()),
        clustered=int((sizes > 1).sum()),
        largest=int(sizes.max()) if len(sizes) else 0,
        saved=saved,
        candidates=candidates,
    )


def record_chains(conn: apsw.Connection, candidates: str, below: int) -> None:
    """Add to the last clustering run's record how its candidate pairs were made ("sketch" or
    "fingerprint") and how many members are below the threshold to their representative
    (chains.below_members)."""
    with write_transaction(conn):
        conn.execute(
            "UPDATE simhash_meta SET value = json_set(value, '$.candidates', ?, '$.below', ?) WHERE key = 'clusters'",
            (candidates, below),
        )


def candidates_text(info: dict) -> str:
    """How a clustering run's candidate pairs were made, in words."""
    if info.get("candidates") == "sketch":
        return "candidates from the sketches' LSH tables, at any distance"
    return f"candidates within distance k={info['k']}"


def clustering_info(conn: apsw.Connection) -> dict | None:
    """k, rule, document count and time of the last clustering run, or None if there was none.
    InvalidMetadata (naming the key) for a record simhash-sqlite did not write."""
    value = conn.execute("SELECT value FROM simhash_meta WHERE key = 'clusters'").get
    if value is None:
        return None
    problem = clusters_record_problem(value)
    if problem is not None:
        raise InvalidMetadata(conn.filename or "the index", "clusters", problem + "; simq clusters records it again")
    return json.loads(value)


def read_clusters(conn: apsw.Connection, min_size: int = 2) -> Iterator[Cluster]:
    """The clusters of at least min_size documents from the clusters table, in cluster id order, streamed."""
    if isinstance(min_size, bool) or not isinstance(min_size, int):
        raise InvalidArgument(f"min_size must be a whole number, not {min_size!r}")
    min_size = max(-1, min(min_size, 1 << 62))  # beyond any cluster's size (SQLite integers are 64-bit)
    rows = conn.execute(
        """SELECT c.cluster, c.size, r.key, d.key FROM clusters c
           JOIN documents d ON d.id = c.id JOIN documents r ON r.id = c.representative
           WHERE c.size >= ? ORDER BY c.cluster, c.id""",
        (min_size,),
    )
    head: tuple[int, int, str] | None = None  # (cluster, size, representative) of the cluster being read
    members: list[str] = []
    for cluster, size, rep, key in rows:
        if head is None or cluster != head[0]:
            if head is not None:
                yield Cluster(*head, tuple(members))
            head, members = (cluster, size, rep), []
        members.append(key)
    if head is not None:
        yield Cluster(*head, tuple(members))
