"""simq's near-duplicates of a whole index: dupes (pairs), clusters, calibrate (choose k and the
threshold), decisions (a reviewed list of what to remove).
"""

from __future__ import annotations

import heapq
import itertools
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..analysis.calibrate import DEFAULT_MAX_K, MAX_CALIBRATED_K, Calibration
from ..analysis.calibrate import calibrate as calibrate_index
from ..core.settings import DEFAULT_THRESHOLD
from ..errors import InvalidArgument
from ..find.arrays import DuplicatePair
from ..find.chains import cluster_members
from ..find.clusters import REPRESENTATIVE_RULES, Cluster, candidates_text
from ..find.review import (
    FEW_LABELS,
    calibrate_labels,
    deletions,
    population,
    write_decisions,
)
from ..find.verdict import CERTAIN, CheckSummary
from ..index import SimhashIndex
from ..pipeline.spill import default_memory, parse_memory
from ..quick.words import check_json
from ..web.plots import (
    distance_chart,
    distance_distribution,
    distance_png,
    labels_png,
    require_matplotlib,
    write_png,
)
from . import output
from .errors import friendly_errors
from .options import (
    DEFAULT_DB,
    DUPLICATES_PANEL,
    SHOWN_ROWS,
    CandidateKOption,
    CheckOption,
    DbOption,
    FormatOption,
    JsonOption,
    OutOption,
    ThresholdOption,
)
from .output import line, out, printable
from .reports import counted, k_uses, print_check_summary, progress_to, say, tell_sketch_upgrade, verdict_json, warn

commands = typer.Typer()  # this module's commands; app.py lists them all, in --help's order

# --memory of dupes and clusters: dedup's option, parsed the same way. Its default is half the machine's
# memory, not dedup's (a quarter, at most 1G): below about 400 bytes a document the search holds the rows once
# (160 bytes a document, about the same CPU), and below that it searches from disk, far slower (BENCHMARKS.md).
PairsMemoryOption = Annotated[
    Optional[str],
    typer.Option(
        "--memory", metavar="SIZE",
        help="RAM for the whole command (512M, 2G); an index that needs more is searched with its sketches held "
        "once, or from sorted runs in the temporary folder, with the same pairs. \\[default: half the machine's "
        "memory]",
        show_default=False,
    ),
]


def _budget(memory: Optional[str]) -> int:
    if memory is not None:
        return parse_memory(memory)
    try:
        return max(default_memory(), os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2)
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): dedup's default
        return default_memory()


@commands.command("calibrate", rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def calibrate_command(
    db: DbOption = Path(DEFAULT_DB),
    max_k: Annotated[
        int, typer.Option("--max-k", help="Largest distance to sample.", min=0, max=MAX_CALIBRATED_K)
    ] = DEFAULT_MAX_K,
    pairs: Annotated[int, typer.Option("--pairs", help="Pairs to sample at each distance.", min=1)] = 30,
    threshold: Annotated[
        float, typer.Option("--threshold", help="The exact Jaccard that counts as a near-duplicate.")
    ] = DEFAULT_THRESHOLD,
    seed: Annotated[int, typer.Option(help="Seed for choosing the documents.")] = 0,
    format_: FormatOption = None,
    as_json: JsonOption = False,
    plot: Annotated[
        Optional[Path], typer.Option(help="Also draw the distance distribution as a PNG image here (needs matplotlib).")
    ] = None,
    labels: Annotated[
        bool,
        typer.Option("--labels", help="Instead: precision, recall and F1 per Jaccard threshold estimated from the "
                     "labels of simq serve --review, with the recommended threshold and its 90% interval."),
    ] = False,
) -> None:
    """What each k means on this index: the Jaccard of sampled pairs at each distance, as a chart.

    The exact 5-shingle Jaccard of sampled pairs at each distance, and a chart of where near-duplicate
    and unrelated pairs fall.

    json prints the whole result (threshold, queried, suggested_k, rows); jsonl, csv and tsv one
    distance a record.
    """
    format_ = output.choose_format(format_, as_json)
    if labels:
        _calibrate_from_labels(db, format_, plot, seed)
        return
    if plot is not None:
        require_matplotlib()  # before the sampling, which takes a while
    with SimhashIndex(db, readonly=True) as index, output.progress("docs") as progress:
        task = progress.add_task("sampling", total=None)
        result = calibrate_index(
            index, max_k=max_k, per_distance=pairs, threshold=threshold,
            seed=seed,
            on_progress=progress_to(progress, task),
        )
        distribution = distance_distribution(index, result, per_distance=pairs, seed=seed)
    if plot is not None:
        write_png(distance_png(distribution), plot)
        say(f"chart written to {plot}", to_stderr=True)
    rows = [row.__dict__ for row in result.rows]
    if format_ == "json":
        output.render_one(
            {"threshold": result.threshold, "queried": result.queried, "suggested_k": result.suggested_k, "rows": rows},
            "json",
        )
    elif format_ == "table":
        _print_calibration(result)
        out.print(distance_chart(distribution))
    else:
        output.render(rows, format_)


def _calibrate_from_labels(db: Path, format_: str, plot: Path | None, seed: int) -> None:
    if plot is not None:
        require_matplotlib()
    with SimhashIndex(db, readonly=True) as index, output.progress("share") as progress:
        task = progress.add_task("pairs", total=None)
        pop = population(index, on_progress=progress_to(progress, task))
        result = calibrate_labels(index, pop, seed=seed)
    if plot is not None:
        write_png(labels_png(result, DEFAULT_THRESHOLD), plot)
        say(f"chart written to {plot}", to_stderr=True)
    rows = [row.__dict__ for row in result.rows]
    summary = {name: getattr(result, name) for name in (
        "recommended", "interval", "precision", "recall", "f1", "precision_interval", "recall_interval", "labels",
        "unsure", "outside", "population", "unscored", "borrowed", "duplicates", "missing")}
    if format_ == "json":
        output.render_one({**summary, "rows": rows}, "json")
        return
    if format_ != "table":
        output.render(rows, format_)
        return
    if not result.labels:
        say(f"no labels to calibrate from: label pairs with simq serve --review --db {db}")
        return
    table = Table("threshold", "precision", "recall", "F1", "pairs above",
                  title=f"Estimated from {counted(result.labels, 'label')} over {result.population:,} candidate pairs")
    for row in result.rows:
        if round(row.threshold * 100) % 5 and row.threshold != result.recommended:
            continue
        style = "bold green" if row.threshold == result.recommended else None
        table.add_row(f"{row.threshold:.2f}", *("-" if x is None else f"{x:.3f}" for x in (row.precision, row.recall,
                      row.f1)), f"{row.above:,.0f}", style=style)
    out.print(table)
    if result.recommended is None:
        say(f"no threshold recommended yet: {result.missing}" if result.missing else
            "no label says duplicate: no threshold to recommend")
        return

    def span(pair):
        return "" if pair is None else f" ({pair[0]:.3f}-{pair[1]:.3f})"

    interval = "" if result.interval is None else f" (90% interval {result.interval[0]:.2f}-{result.interval[1]:.2f})"
    out.print(line("recommended Jaccard threshold: ", (f"{result.recommended:.2f}", "bold"), interval))
    say(f"precision {result.precision:.3f}{span(result.precision_interval)}, recall {result.recall:.3f}"
        f"{span(result.recall_interval)}, F1 {result.f1:.3f}; use it: simq dupes --threshold {result.recommended:.2f}")
    if result.labels < FEW_LABELS:
        say(f"only {counted(result.labels, 'label')}: read the intervals, not the numbers; a few hundred labels "
            "of the review sample narrow them")
    notes = [f"{result.unsure:,} unsure"] if result.unsure else []
    if result.outside:
        notes.append(f"{result.outside:,} below Jaccard 0.5 left out")
    if result.unscored:
        notes.append(f"{result.unscored:,} candidate pairs judged by distance only left out")
    if notes:
        say("; ".join(notes))


def _print_calibration(result: Calibration) -> None:
    def cell(x):
        return "-" if x is None else f"{x:.3f}"

    table = Table("dist", "pairs", "mean J", "low", "high", f"J>={result.threshold:g}", "expected", "mean J",
                  title="Sampled pairs by distance: exact 5-shingle Jaccard (J)")
    table.columns[-1].no_wrap = True
    for row in result.rows:
        bar = "" if row.mean is None else "█" * round(row.mean * 10)
        style = "green" if row.share_similar is not None and row.share_similar >= 0.5 else None
        table.add_row(str(row.distance), str(row.pairs), cell(row.mean), cell(row.low), cell(row.high),
                      cell(row.share_similar), f"{row.estimated:.2f}", bar, style=style)
    out.print(table)
    say(f"{counted(result.pairs, 'pair')} from the neighbours of {counted(result.queried, 'document')}"
        + (f" ({result.without_text:,} sampled documents had no text to compare)" if result.without_text else ""))
    if result.suggested_k is None:
        say(f"no sampled distance has most pairs at Jaccard >= {result.threshold:g}; too few near-duplicates to say")
    else:
        out.print(line("suggested k: ", (str(result.suggested_k), "bold"), " for distance alone (--no-check) on "
                       f"this index: most sampled pairs up to this distance have Jaccard >= {result.threshold:g}"))
    say(f"the defaults: {k_uses()}")


@commands.command(rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def decisions(
    db: DbOption = Path(DEFAULT_DB),
    output_path: OutOption = None,
    format_: Annotated[
        str, typer.Option("--format", help="jsonl (one object a line) or csv (with a header line).")
    ] = "jsonl",
) -> None:
    """What to delete: each duplicate with the key kept in its place, for a deletion script or simq rm --decisions.

    From the clusters of the last simq clusters, honouring the labels of simq serve --review: the kept member is
    the one chosen, else the representative; a member labelled "not a duplicate" of it, and every chosen keeper,
    stay. Each row: key, kept, jaccard, checked_by (exact, estimated, distance), distance, label.
    """
    if format_ not in ("jsonl", "csv"):
        raise InvalidArgument(f"--format is jsonl or csv, not {format_!r}")
    with SimhashIndex(db, readonly=True) as index:
        rows, note = deletions(index)
    with output.destination(output_path) as handle:
        written = write_decisions(rows, handle, format_)
    extra = []
    if note.kept_apart:
        extra.append(f"{counted(note.kept_apart, 'member')} kept as labelled not a duplicate")
    if note.keepers:
        extra.append(f"{counted(note.keepers, 'more keeper')} kept")
    say(f"{counted(written, 'document')} to delete from {counted(note.clusters, 'cluster')}"
        + (f" ({', '.join(extra)})" if extra else ""), to_stderr=True)
    if note.stale:
        warn("note", f"labels or documents changed since the clusters were made: simq clusters --db {db} regroups "
             "them (the list above already honours every label)")


@commands.command(rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def dupes(
    db: DbOption = Path(DEFAULT_DB),
    k: CandidateKOption = None,
    format_: FormatOption = None,
    as_json: JsonOption = False,
    output_path: OutOption = None,
    check: CheckOption = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    uncertain: Annotated[
        bool,
        typer.Option(
            "--uncertain",
            help="List the pairs whose verdict is uncertain instead (an estimate short of certainty "
            f"{CERTAIN}, the texts out of reach, or by distance alone), near-duplicates or not, to review them.",
        ),
    ] = False,
    memory: PairsMemoryOption = None,
) -> None:
    """Every pair of near-duplicate documents, each once, checked by the Jaccard of their texts.

    Estimated from the stored sketches where that is sure, else exact where the texts can be read, else the
    unsure estimate; every row says which and how sure. Without --k the candidates come
    from the sketches (any distance); with --k, or an index whose documents lack sketches, they are the
    pairs within distance k.

    The table shows the first 50 pairs, closest first; the other formats stream every pair.
    """
    format_ = output.choose_format(format_, as_json)
    if uncertain and not check:
        raise InvalidArgument("--uncertain lists checked pairs: it cannot go with --no-check")
    streaming_here = format_ != "table" and output_path is None and out.is_terminal
    budget = _budget(memory)
    with SimhashIndex(db, readonly=True) as index, output.progress("share", hidden=streaming_here) as progress:
        tell_sketch_upgrade(index)
        task = progress.add_task("pairs", total=None)
        found = index.dupes(
            k, check=check, threshold=threshold, uncertain=uncertain, on_progress=progress_to(progress, task),
            memory=budget,
        )
        pairs, report = iter(found), found.report
        records = map(_pair_json, pairs)
        columns = ["first", "second", "distance", "similarity", "jaccard", "checked", "checked_by", "certainty",
                   "duplicate"]
        if format_ == "table":
            shown = list(itertools.islice(records, SHOWN_ROWS))
            more = sum(1 for _ in records)
            progress.stop()
            _dupes_table(shown, more, found.k, report, output_path, uncertain)
            return
        with output.destination(output_path) as handle:
            output.render(records, format_, handle, columns=columns)
    if report is not None:
        print_check_summary(report, "pair", to_stderr=True, hint=not uncertain)
    searched = getattr(found, "search_plan", None)
    if searched is not None and searched.least > budget:
        warn("memory", f"--memory {budget >> 20}M is below the least this search holds (the process, its arrays "
                       f"and the disk search's buffers): it took about {-(-searched.least >> 20)}M")
    if found.apart:
        say(f"{counted(found.apart, 'pair')} labelled not a duplicate left out", to_stderr=True)


def _pair_json(pair: DuplicatePair) -> dict:
    """A pair as JSON: its keys, distance and similarity, the check's fields (check_json), its verdict."""
    return {
        "first": pair.first,
        "second": pair.second,
        "distance": pair.distance,
        "similarity": round(pair.similarity, 4),
        **check_json(pair.jaccard, pair.checked_by, pair.certainty),
        "duplicate": pair.keeps,
    }


def _dupes_table(
    shown: list[dict], more: int, k: int, report: Optional[CheckSummary], output_path: Optional[Path],
    uncertain: bool = False,
) -> None:
    to_stderr = output_path is not None
    if not shown:
        if uncertain:
            say("no uncertain verdict: every candidate was settled")
        elif report is not None and report.candidates:
            say("no pair passed the check")
        elif report is not None and report.candidates_from == "sketch":
            say("no pairs: no two documents share a window of their sketches")
        else:
            say(f"no pairs within distance {k}")
    else:
        checked = ["jaccard", "checked_by", "certainty"] + (["duplicate"] if uncertain else [])
        columns = ["first", "second", "distance", "similarity"] + (checked if report is not None else [])
        shown.sort(key=lambda p: (p["distance"], p["first"], p["second"]))
        with output.destination(output_path) as handle:
            output.render(shown, "table", handle, columns=columns, fold=["first", "second"])
        if more:
            say(f"{counted(more, 'more pair')} not shown: use --format jsonl, csv or tsv", to_stderr=to_stderr)
    if report is not None:
        print_check_summary(report, "pair", to_stderr=to_stderr, hint=not uncertain)
    elif shown:
        say(f"{counted(len(shown) + more, 'pair')} within distance {k}", to_stderr=to_stderr)


@commands.command(rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def clusters(
    db: DbOption = Path(DEFAULT_DB),
    k: CandidateKOption = None,
    representative: Annotated[
        str, typer.Option(help=f"Which member represents a cluster: {', '.join(REPRESENTATIVE_RULES)}.")
    ] = "first",
    format_: FormatOption = None,
    as_json: JsonOption = False,
    output_path: OutOption = None,
    min_size: Annotated[int, typer.Option(help="Show/export clusters of at least this many documents.", min=1)] = 2,
    check: CheckOption = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    memory: PairsMemoryOption = None,
) -> None:
    """Cluster documents (chains of the pairs simq dupes finds), write the clusters table, show or export them.

    The table shows the 50 largest; json and jsonl print one cluster a record with its members,
    csv and tsv one member a row.
    """
    format_ = output.choose_format(format_, as_json)
    budget = _budget(memory)
    with SimhashIndex(db) as index:
        tell_sketch_upgrade(index)
        with output.progress("share") as progress:
            task = progress.add_task("clustering", total=None)
            report = index.clusters(
                k, check=check, threshold=threshold, representative=representative,
                on_progress=progress_to(progress, task), memory=budget,
            )
        found_by = "with " + candidates_text({"candidates": report.candidates, "k": report.k})
        found = index.cluster_list(min_size=min_size)
        chained = report.chained or {}
        with output.destination(output_path) as handle:
            if format_ == "table":
                biggest = heapq.nlargest(SHOWN_ROWS, found, key=lambda c: (c.size, -c.cluster))
                _clusters_table(biggest, handle, chained)
                _print_chains(index, biggest, chained, report.check)
            elif format_ in ("csv", "tsv"):
                members = (
                    {"cluster": c.cluster, "size": c.size, "representative": c.representative, "key": key,
                     "below": key in below}
                    for c in found for below in [{k for k, _ in chained.get(c.cluster, ())}] for key in c.members
                )
                output.render(members, format_, handle, columns=["cluster", "size", "representative", "key", "below"])
            else:
                line = report.check.threshold if report.check is not None else None
                output.render((_cluster_json(index, c, chained, line) for c in found), format_, handle)
    say(
        f"{db}: {counted(report.documents, 'document')} in {counted(report.clusters, 'cluster')} {found_by} "
        f"({report.clustered:,} in clusters of two or more, largest {report.largest:,}); "
        f"keeping one of each would drop {report.duplicates:,}"
        + (f"; {report.below:,} members are below the Jaccard line to their representative (joined through others)"
           if report.below else "") + ". "
        + ("Written to the clusters table." if report.saved else "Not saved: the index is read-only here."),
        to_stderr=True,
    )
    if report.check is not None:
        print_check_summary(report.check, "pair", suffix=" joined clusters", to_stderr=True)


def _cluster_json(index: SimhashIndex, c: Cluster, chained: dict, threshold: Optional[float]) -> dict:
    record = {"cluster": c.cluster, "size": c.size, "representative": c.representative, "members": list(c.members)}
    if c.cluster in chained:
        _, _, members = cluster_members(index, c.cluster, threshold=threshold)
        record["below"] = [
            {"key": m.key, **verdict_json(m.verdict), "path": None if m.path is None else list(m.path)}
            for m in members if m.below
        ]
    else:
        record["below"] = []
    return record


def _clusters_table(biggest: list[Cluster], handle, chained: dict) -> None:
    if not biggest:
        say("no clusters of that size")
        return
    rows = []
    for c in biggest:
        others = [m for m in c.members if m != c.representative]
        shown = ", ".join(map(printable, others[:3])) + (f", ... ({len(others) - 3} more)" if len(others) > 3 else "")
        rows.append({"cluster": c.cluster, "size": c.size, "below": len(chained.get(c.cluster, ())),
                     "representative": c.representative, "other members": shown})
    output.render(rows, "table", handle, fold=["representative", "other members"])


CHAINS_SHOWN = 10


def _print_chains(index: SimhashIndex, biggest: list[Cluster], chained: dict, check: Optional[CheckSummary]) -> None:
    """The members of the shown clusters that are below the Jaccard line to their representative, with the
    chain of near-duplicate pairs that joined them (the first CHAINS_SHOWN)."""
    told = 0
    threshold = check.threshold if check is not None else None
    for c in biggest:
        if c.cluster not in chained or told >= CHAINS_SHOWN:
            continue
        _, rep, members = cluster_members(index, c.cluster, threshold=threshold)
        for m in members:
            if not m.below or told >= CHAINS_SHOWN:
                continue
            told += 1
            v = m.verdict
            assert v is not None  # below: judged against the representative
            how = "distance only" if v.jaccard is None else f"{v.checked_by} Jaccard {v.jaccard:.3f}"
            via = " -> ".join(map(printable, m.path)) if m.path else "(cluster too large to search for the path)"
            say(f"cluster {c.cluster}: {printable(m.key)} is below the line to {printable(rep)} ({how}); joined "
                f"through {via}")
    total = sum(len(chained.get(c.cluster, ())) for c in biggest)
    if total > told:
        say(f"{counted(total - told, 'more member')} below the line in these clusters: --format json lists them "
            "with their paths")

