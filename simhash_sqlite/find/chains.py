"""Chains in clusters: the members the check would not pair with their cluster's representative, and
the path of checked pairs that put them in its cluster.

A cluster is a connected component of the pairs `dupes` keeps, so A~B and B~C put A and C together
even where A and C are far apart. Each member is judged against its representative with the one
verdict (verdict.decide); a member it does not keep is "below" and joined through others. Its path: the
shortest chain of kept pairs from the representative, found among all pairs of the cluster's members
(every pair judged as `dupes` judges it, so each hop is a pair every command calls a near-duplicate)
for clusters of up to PATH_MEMBERS members.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import cast

import numpy as np

from ..core.settings import DEFAULT_THRESHOLD
from ..errors import InvalidInput
from ..store.database import IndexFile
from .arrays import keys_of
from .bounded_pairs import arrays_of, needs_bound
from .check import PairCheck, load_arrays
from .verdict import Verdict

# Paths are searched among all pairs of a cluster of at most this many members (n**2 / 2 verdicts).
PATH_MEMBERS = 400
CHUNK = 1 << 16


@dataclass(frozen=True)
class MemberVerdict:
    key: str
    distance: int | None  # to the representative; None without fingerprints
    verdict: Verdict | None  # against the representative; None for the representative itself
    path: tuple[str, ...] | None = None  # below members: representative ... key, each hop kept; None: not found

    @property
    def below(self) -> bool:
        return self.verdict is not None and not self.verdict.keeps


def threshold_of(index: IndexFile) -> float:
    """The Jaccard threshold the last clustering run used (the default when it recorded none)."""
    from .clusters import clustering_info

    info = clustering_info(index.conn) or {}
    return info.get("jaccard") or DEFAULT_THRESHOLD


def below_members(
    index: IndexFile, threshold: float | None = None, memory: int | None = None
) -> dict[int, list[tuple[str, Verdict]]]:
    """Every member of a cluster of two or more that the check does not keep against its representative:
    cluster -> [(key, verdict)], in id order. The verdicts of all members in vectorized chunks. memory:
    as for all pairs (bounded_pairs.py); past it each chunk's fingerprints and sketches are read by id."""
    threshold = threshold_of(index) if threshold is None else threshold
    conn = index.conn
    scheme = index.sketch_scheme
    by_chunk = needs_bound(conn.execute("SELECT count(*) FROM documents").get, scheme.nbytes, memory)
    if not by_chunk:
        ids, values, rows, present = load_arrays(conn, scheme)
    pairs = np.array(
        conn.execute(
            "SELECT id, representative, cluster FROM clusters WHERE size > 1 AND id != representative ORDER BY id"
        ).fetchall() or np.empty((0, 3)),
        dtype=np.int64,
    ).reshape(-1, 3)
    check = PairCheck(index, threshold=threshold)
    found: dict[int, list[tuple[str, Verdict]]] = {}
    for lo in range(0, len(pairs), CHUNK):
        member, rep, cluster = pairs[lo : lo + CHUNK].T
        if by_chunk:
            ids, values, rows, present = arrays_of(conn, scheme, np.concatenate((member, rep)))
        a, b = np.searchsorted(ids, rep), np.searchsorted(ids, member)
        known = (a < len(ids)) & (b < len(ids))
        known[known] &= (ids[a[known]] == rep[known]) & (ids[b[known]] == member[known])  # both fingerprinted
        a, b, member, rep, cluster = a[known], b[known], member[known], rep[known], cluster[known]
        keys = keys_of(conn, np.concatenate((member, rep)))
        distance = np.bitwise_count(values[a] ^ values[b]).astype(np.int64)
        verdicts = check.judge([keys[i] for i in rep.tolist()], [keys[i] for i in member.tolist()], distance,
                               rows[a], rows[b], present[a] & present[b])
        for i in np.flatnonzero(~verdicts.keep).tolist():
            found.setdefault(int(cluster[i]), []).append((keys[int(member[i])], verdicts[i]))
    return found


def cluster_members(index: IndexFile, cluster: int, shown: int | None = None,
                    threshold: float | None = None) -> tuple[int, str, list[MemberVerdict]]:
    """(size, representative, members) of one cluster: each member (the first `shown` in id order, None
    for all) with its distance and verdict against the representative, and for those below, the path of
    kept pairs that joined them (clusters of up to PATH_MEMBERS)."""
    threshold = threshold_of(index) if threshold is None else threshold
    conn = index.conn
    head = cast(list[tuple[int, str, int]], conn.execute(
        "SELECT c.size, r.key, c.representative FROM clusters c JOIN documents r ON r.id = c.representative "
        "WHERE c.cluster = ? LIMIT 1", (cluster,)
    ).fetchall())
    if not head:
        raise InvalidInput(f"no cluster {cluster} in this index (run simq clusters to make them)")
    size, rep_key, rep_id = head[0]
    searched = size <= PATH_MEMBERS
    limit = -1 if searched or shown is None else shown
    rows = cast(list[tuple[int, str, int | None, bytes | None]], conn.execute(
        "SELECT d.id, d.key, d.fingerprint, d.sketch FROM clusters c JOIN documents d ON d.id = c.id "
        "WHERE c.cluster = ? ORDER BY c.id LIMIT ?", (cluster, limit)
    ).fetchall())
    if rep_id not in {r[0] for r in rows}:
        rows += cast(list[tuple[int, str, int | None, bytes | None]], conn.execute(
            "SELECT id, key, fingerprint, sketch FROM documents WHERE id = ?", (rep_id,)).fetchall())
    keys = [r[1] for r in rows]
    nbytes = index.sketch_scheme.nbytes
    fingerprinted = np.array([r[2] is not None for r in rows])
    values = np.array([0 if r[2] is None else r[2] for r in rows], dtype=np.int64).view(np.uint64)
    sketches = np.zeros((len(rows), nbytes), dtype=np.uint8)
    present = np.array([isinstance(r[3], bytes) and len(r[3]) == nbytes for r in rows])
    for i in np.flatnonzero(present).tolist():
        sketches[i] = np.frombuffer(rows[i][3], dtype=np.uint8)
    check = PairCheck(index, threshold=threshold)
    r = keys.index(rep_key)
    n = len(rows)
    if searched:
        left, right = np.triu_indices(n, 1)
    else:  # only against the representative
        left, right = np.full(n, r), np.arange(n)
    usable = fingerprinted[left] & fingerprinted[right] & (left != right)
    left, right = left[usable], right[usable]
    distance = np.bitwise_count(values[left] ^ values[right]).astype(np.int64)
    verdicts = check.judge([keys[i] for i in left.tolist()], [keys[i] for i in right.tolist()], distance,
                           sketches[left], sketches[right], present[left] & present[right])
    against_rep: dict[int, tuple[int, Verdict]] = {}
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for p, (x, y, d) in enumerate(zip(left.tolist(), right.tolist(), distance.tolist())):
        if x == r or y == r:
            against_rep[y if x == r else x] = (d, verdicts[p])
        if verdicts.keep[p]:
            neighbours[x].append(y)
            neighbours[y].append(x)
    back = _breadth_first(neighbours, r) if searched else None
    members = []
    for i, key in enumerate(keys):
        if i == r:
            members.append(MemberVerdict(key, 0 if fingerprinted[i] else None, None))
            continue
        d, verdict = against_rep.get(i, (None, None))
        path = None
        if verdict is not None and not verdict.keeps and back is not None and i in back:
            hops, at = [i], i
            while at != r:
                at = back[at]
                hops.append(at)
            path = tuple(keys[j] for j in reversed(hops))
        members.append(MemberVerdict(key, d, verdict, path))
    if shown is not None:
        members = members[:shown]
    return size, rep_key, members


def _breadth_first(neighbours: list[list[int]], start: int) -> dict[int, int]:
    """The previous node on a shortest path from start, for every node reached."""
    back, queue = {start: start}, deque([start])
    while queue:
        node = queue.popleft()
        for other in neighbours[node]:
            if other not in back:
                back[other] = node
                queue.append(other)
    return back
