"""Charts for what people would rather see than read: where near-duplicate and unrelated pairs fall by
distance (behind simq calibrate), and how large the clusters are (simq stats, the web clusters page).

The data are plain functions of an index; the terminal charts are rich renderables; the images need
matplotlib (the [web] extra), imported only when an image is asked for.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import cast

import apsw
import numpy as np
from rich.table import Table
from rich.text import Text

from ..analysis.calibrate import Calibration
from ..core.settings import RECOMMENDED_K
from ..errors import MissingExtra
from ..index import SimhashIndex

BITS = 64
RANDOM_PAIRS = 2000
BAR_WIDTH = 18
# Distances past the calibrated range are shown in bands this wide (unrelated pairs spread over 20-44).
FAR_BAND = 4


@dataclass(frozen=True)
class DistanceDistribution:
    """Pairs by Hamming distance 0..64: the calibration's sampled neighbours split by their exact
    Jaccard, and random pairs of documents (nearly all unrelated) for contrast."""

    similar: list[int]  # sampled pairs at each distance with Jaccard >= threshold (0 past max_k)
    dissimilar: list[int]  # sampled pairs at each distance with Jaccard < threshold
    unrelated: list[int]  # random pairs at each distance
    threshold: float
    max_k: int  # the largest distance the calibration sampled
    per_distance: int | None  # the most pairs it would sample at one distance (None: not said)
    suggested_k: int | None  # the calibration's
    recommended_k: int = RECOMMENDED_K  # the default's, measured on the quality benchmark

    @property
    def random_pairs(self) -> int:
        return sum(self.unrelated)


def distance_distribution(
    index: SimhashIndex,
    calibration: Calibration,
    *,
    per_distance: int | None = None,
    random_pairs: int = RANDOM_PAIRS,
    seed: int = 0,
) -> DistanceDistribution:
    """The distribution to draw: the calibration's rows (sampled with at most `per_distance` pairs at
    each distance, when the caller says), plus the distances of `random_pairs` pairs of randomly
    chosen documents."""
    size = BITS + 1
    similar, dissimilar = [0] * size, [0] * size
    for row in calibration.rows:
        if row.share_similar is not None:  # (row.pairs > 0)
            near = round(row.share_similar * row.pairs)
            similar[row.distance], dissimilar[row.distance] = near, row.pairs - near
    distances = random_pair_distances(index.conn, random_pairs, seed)
    unrelated = np.bincount(distances, minlength=size).tolist()
    max_k = calibration.rows[-1].distance if calibration.rows else 0
    return DistanceDistribution(similar, dissimilar, unrelated, calibration.threshold, max_k, per_distance,
                                calibration.suggested_k)


def random_pair_distances(conn: apsw.Connection, pairs: int, seed: int = 0) -> np.ndarray:
    """Hamming distances of up to `pairs` pairs of distinct random documents with fingerprints.

    Ids are drawn at random under max(id) and the ones present read through the primary key, so
    the cost does not grow with the index."""
    top = conn.execute("SELECT coalesce(max(id), 0) FROM documents").get
    rng = np.random.default_rng(seed)
    wanted = min(top, 4 * pairs)
    if wanted < 2:
        return np.zeros(0, dtype=np.int64)
    ids = rng.choice(top, size=wanted, replace=False) + 1
    found = conn.execute(
        "SELECT fingerprint FROM documents WHERE id IN carray(?) AND fingerprint IS NOT NULL",
        (apsw.carray(ids.astype(np.int64)),),
    ).fetchall()
    values = np.array([fp for (fp,) in found], dtype=np.int64).view(np.uint64)
    rng.shuffle(values)
    n = min(pairs, len(values) // 2)
    return np.bitwise_count(values[:n] ^ values[n : 2 * n]).astype(np.int64)


def _bar(value: float, most: float, style: str) -> Text:
    width = 0 if most <= 0 else round(BAR_WIDTH * value / most)
    if value > 0 and width == 0:
        width = 1  # a count that exists shows, however small
    return Text("█" * width, style=style)


def _sampled(dist: DistanceDistribution) -> str:
    cap = f"at most {dist.per_distance} " if dist.per_distance is not None else ""
    return f"{cap}neighbours per distance up to {dist.max_k}"


def distance_chart(dist: DistanceDistribution) -> Table:
    """A terminal chart: one row per distance up to max_k, then bands of FAR_BAND distances; the
    sampled pairs as one bar (green: Jaccard >= threshold, yellow: below), the random pairs as another,
    the suggested and default k marked."""
    t = f"{dist.threshold:g}"
    table = Table(
        "d", "sampled pairs", f"J>={t}", "random pairs", "",
        title="Pairs by Hamming distance (d)",
        caption=f"sampled: {_sampled(dist)}, [green]J >= {t}[/] or [yellow]J < {t}[/] (J: their exact 5-shingle "
        f"Jaccard); [blue]random[/]: {dist.random_pairs:,} pairs of random documents",
        box=None, pad_edge=False,
    )
    for column in table.columns:
        column.no_wrap = True
    most_sampled = max(max(a + b for a, b in zip(dist.similar, dist.dissimilar)), 1)
    most_random = max(max(dist.unrelated), 1)
    rows: list[tuple[str, range]] = [(str(d), range(d, d + 1)) for d in range(dist.max_k + 1)]
    last = max((d for d, n in enumerate(dist.unrelated) if n), default=dist.max_k)
    for low in range(dist.max_k + 1, last + 1, FAR_BAND):
        band = range(low, min(low + FAR_BAND, BITS + 1))
        rows.append((f"{band[0]}-{band[-1]}", band))
    for label, band in rows:
        near = sum(dist.similar[d] for d in band)
        other = sum(dist.dissimilar[d] for d in band)
        rand = sum(dist.unrelated[d] for d in band)
        ks = (("suggested", dist.suggested_k), ("--no-check default", dist.recommended_k))
        marks = [name for name, k in ks if k in band]
        table.add_row(
            label,
            Text.assemble(_bar(near, most_sampled, "green"), _bar(other, most_sampled, "yellow")),
            f"{near}/{near + other}" if near + other else "",
            Text.assemble(_bar(rand, most_random * len(band), "blue"), f" {rand}" if rand else ""),
            Text("◀ " + " and ".join(marks) + " k", style="bold") if marks else "",
        )
    return table


def require_matplotlib():
    """matplotlib's Figure (no pyplot: no global state, safe in threads), or MissingExtra."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingExtra("drawing an image needs matplotlib: pip install 'simhash-sqlite[web]'") from None
    return Figure


def distance_png(dist: DistanceDistribution) -> bytes:
    """The same distribution as a PNG image: sampled neighbours above, random pairs below, the suggested
    and default k as vertical lines."""
    figure = require_matplotlib()(figsize=(9, 5.5), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True)
    x = np.arange(BITS + 1)
    top.bar(x, dist.similar, color="#2e8b57", label=f"near-duplicates (J >= {dist.threshold:g})")
    top.bar(x, dist.dissimilar, bottom=dist.similar, color="#e0a030", label=f"not (J < {dist.threshold:g})")
    top.set_ylabel("sampled pairs")
    top.set_title(f"Sampled neighbours ({_sampled(dist)}) by exact Jaccard")
    bottom.bar(x, dist.unrelated, color="#4a6fa5", label="random pairs")
    bottom.set_ylabel("random pairs")
    bottom.set_xlabel("Hamming distance (bits of 64)")
    bottom.set_title(f"{dist.random_pairs:,} pairs of random documents")
    for axes in (top, bottom):
        if dist.suggested_k is not None:
            axes.axvline(dist.suggested_k + 0.5, color="black", linestyle="--",
                         label=f"suggested k = {dist.suggested_k}")
        axes.axvline(dist.recommended_k + 0.5, color="grey", linestyle=":",
                     label=f"default k = {dist.recommended_k} (--no-check)")
        axes.legend(loc="upper right", fontsize="small")
    axes.set_xlim(-0.5, BITS + 0.5)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def labels_png(calibration, threshold: float) -> bytes:
    """Precision, recall and F1 by Jaccard threshold, estimated from the labels; the recommended
    threshold and its interval marked."""
    figure = require_matplotlib()(figsize=(8, 4.5), layout="constrained")
    axes = figure.subplots()
    ts = [row.threshold for row in calibration.rows]
    for attribute, colour in (("precision", "#4a6fa5"), ("recall", "#2e8b57"), ("f1", "#8a5cb8")):
        values = [getattr(row, attribute) for row in calibration.rows]
        axes.plot(ts, [float("nan") if v is None else v for v in values], color=colour, label=attribute.upper()
                  if attribute == "f1" else attribute)
    if calibration.recommended is not None:
        if calibration.interval is not None:
            axes.axvspan(*calibration.interval, color="#ddd", label="90% interval")
        axes.axvline(calibration.recommended, color="black", linestyle="--",
                     label=f"recommended {calibration.recommended:.2f}")
    axes.axvline(threshold, color="grey", linestyle=":", label=f"current {threshold:g}")
    axes.set_xlabel("Jaccard threshold")
    axes.set_ylim(0, 1.02)
    axes.set_title(f"Estimated from {calibration.labels} labels ({calibration.population:,} candidate pairs)")
    axes.legend(loc="lower left", fontsize="small")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def write_png(data: bytes, path: str | os.PathLike) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


# -- cluster sizes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeBand:
    low: int
    high: int  # inclusive
    clusters: int
    documents: int

    @property
    def label(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


def cluster_sizes(conn: apsw.Connection) -> list[tuple[int, int]]:
    """(size, number of clusters of that size) from the clusters table, smallest first; empty when
    clusters were never made."""
    return cast(list[tuple[int, int]], conn.execute(
        "SELECT size, count(*) FROM clusters WHERE id = cluster GROUP BY size ORDER BY size"
    ).fetchall())


def size_bands(sizes: list[tuple[int, int]]) -> list[SizeBand]:
    """Sizes in bands that double: 1, 2, 3-4, 5-8, 9-16, ...; only bands that hold clusters."""
    bands: dict[tuple[int, int], list[int]] = {}
    for size, count in sizes:
        e = (size - 1).bit_length()  # the band of sizes 2**(e-1)+1 .. 2**e
        edges = (1, 1) if size == 1 else (2 ** (e - 1) + 1, 2**e)
        band = bands.setdefault(edges, [0, 0])
        band[0] += count
        band[1] += count * size
    return [SizeBand(low, high, n, docs) for (low, high), (n, docs) in sorted(bands.items())]


def size_chart(bands: list[SizeBand]) -> Table:
    """A terminal chart of cluster sizes: clusters and documents per band, bars scaled to the
    documents (a band of large clusters holds many documents in few clusters)."""
    table = Table("size", "clusters", "documents", "", title="Cluster sizes", box=None, pad_edge=False)
    most = max((b.documents for b in bands if b.low > 1), default=1)
    for band in bands:
        bar = Text("(kept as they are)", style="dim") if band.low == 1 else _bar(band.documents, most, "magenta")
        table.add_row(band.label, f"{band.clusters:,}", f"{band.documents:,}", bar)
    return table
