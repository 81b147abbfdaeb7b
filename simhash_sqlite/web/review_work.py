"""What the review pages read and write, as plain functions of an index (or of the labels' writing
connection): run in the pages' worker process (worker.py), the one process that opens the file with
apsw. No web framework here; review.py calls these and renders the answers."""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence

from ..find.review import FEW_LABELS, SAMPLE_SIZE, ScoredPair, calibrate_labels, draw_sample, population
from ..store.database import ensure_sound, has_table
from ..store.labels import keeper_keys, label_of, labels_of, pair_of
from .plots import labels_png


def prepare(conn) -> None:
    """Before serving with --review (on the writing connection, which migrated an older index to the
    labels tables when it opened): the one-off check before the first write, and the WAL an earlier
    review server left folded into the file."""
    ensure_sound(conn)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def current_label(index, a: str, b: str) -> str | None:
    if not a or not b or a == b:
        return None
    found = label_of(index.conn, a, b)
    return None if found is None else found.label


def cluster_state(index, keys: Sequence[str], kept: str) -> dict:
    """The cluster's decisions: the member kept (its keeper, else `kept`: the representative), the
    keepers among the keys, and each other member's label against the kept one."""
    labels = labels_of(index.conn, keys)
    keepers = keeper_keys(index.conn) & set(keys)
    chosen = [k for k in keys if k in keepers]
    kept = chosen[0] if chosen else kept
    return {"kept": kept, "keepers": keepers, "labels": {k: labels.get(pair_of(k, kept)) for k in keys if k != kept}}


def labelled(index, pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """Whether each of the (sorted) pairs has a label."""
    done = labels_of(index.conn, [k for pair in pairs for k in pair])
    return [tuple(pair) in done for pair in pairs]


def cluster_members(index, cluster: str) -> list[str]:
    from ..errors import InvalidInput

    if not cluster.isdigit():
        raise InvalidInput("give the cluster (a number)")
    rows = index.conn.execute(
        "SELECT d.key FROM clusters c JOIN documents d ON d.id = c.id WHERE c.cluster = ? ORDER BY c.id",
        (int(cluster),),
    ).fetchall()
    if not rows:
        raise InvalidInput(f"no cluster {cluster} in this index")
    return [key for (key,) in rows]


def next_cluster(index, cluster: int) -> int | None:
    """The cluster after this one in the clusters page's order (largest first)."""
    conn = index.conn
    size = conn.execute("SELECT size FROM clusters WHERE id = ? AND cluster = ?", (cluster, cluster)).get
    if size is None:
        return None
    return conn.execute(
        "SELECT cluster FROM clusters WHERE id = cluster AND size > 1 AND (size < ? OR (size = ? AND cluster > ?)) "
        "ORDER BY size DESC, cluster LIMIT 1",
        (size, size, cluster),
    ).get


def version(index) -> tuple:
    """What the sample depends on: the documents' count and last id."""
    return tuple(index.conn.execute("SELECT count(*), max(id) FROM documents").fetchone())


def sample(index, threshold: float) -> tuple[int, list[ScoredPair]]:
    """(how many candidate pairs the population holds, the sample to label) of the index as it is."""
    pop = population(index)
    return len(pop.pairs), draw_sample(pop, SAMPLE_SIZE, threshold)


def labels_page(index, threshold: float) -> dict:
    pop = population(index)
    calibration = calibrate_labels(index, pop)
    png = None
    if calibration.labels:
        png = base64.b64encode(labels_png(calibration, threshold)).decode("ascii")
    rows = index.conn.execute(
        "SELECT first, second, label, reviewer, at FROM labels ORDER BY at DESC, first, second LIMIT 50"
    ).fetchall() if has_table(index.conn, "labels") else []
    return {"calibration": calibration, "png": png, "recent": rows, "threshold": threshold,
            "file": os.path.basename(index.path), "few": FEW_LABELS}
