"""simq's streaming filters: dedup (keep the first of each group of near-duplicates, in a memory
budget, resumable) and spark-dedup (the same on Spark, into Parquet).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..core.settings import DEFAULT_THRESHOLD, RECOMMENDED_K, FingerprintSettings, candidate_k
from ..errors import InvalidArgument, InvalidInput
from ..find.verdict import fallback_k
from ..index import SimhashIndex
from ..pipeline.dedup import Deduplicator
from ..pipeline.resume import ResumableOutput, input_identity
from ..pipeline.spill import default_memory, parse_memory
from . import output
from .errors import fail, friendly_errors
from .inputs import input_reader, print_reader_notes, size_of
from .options import (
    DUPLICATES_PANEL,
    SHOWN_SKIPS,
    DropUncertainOption,
    EncodingOption,
    ErrorsOption,
    FeaturesOption,
    HmmOption,
    IdFieldOption,
    JsonlOption,
    NgramOption,
    TextFieldOption,
    ThresholdOption,
    WeightsOption,
)
from .output import out
from .reports import counted, say, warn

commands = typer.Typer()  # this module's commands; app.py lists them all, in --help's order


@commands.command(rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def dedup(
    inputs: Annotated[
        list[str], typer.Argument(help="JSONL files, text files, folders, globs, or - for stdin.", show_default=False)
    ],
    out_path: Annotated[
        Path, typer.Option("--out", "-o", help="Where the kept documents go (JSONL; - for stdout).", show_default=False)
    ],
    k: Annotated[
        Optional[int],
        typer.Option(
            "--k", "-k",
            help="With --check: candidates within this distance instead of the sketches' LSH tables (any distance); "
            f"with --no-check: the largest distance of a duplicate. \\[default: {RECOMMENDED_K} with --no-check]",
            show_default=False,
        ),
    ] = None,
    dupes_file: Annotated[
        Optional[Path],
        typer.Option(
            "--dupes",
            help="Also write each dropped document's key, what it duplicates, the distance, the Jaccard and how it "
            "was checked (JSONL).",
        ),
    ] = None,
    against: Annotated[
        Optional[Path], typer.Option("--against", help="An index whose documents count as already kept (never output).")
    ] = None,
    jsonl: JsonlOption = None,
    text_field: TextFieldOption = "text",
    id_field: IdFieldOption = "id",
    features: FeaturesOption = None,
    ngram: NgramOption = None,
    weights: WeightsOption = None,
    hmm: HmmOption = None,
    encoding: EncodingOption = "utf-8",
    errors: ErrorsOption = "strict",
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Drop a document only if its pair with a kept one is a near-duplicate by the rule of simq dupes "
            "(the exact 5-shingle Jaccard of the two texts; the sketches' estimate only where a text is out of reach, "
            "and then only when sure: certainty >= 0.999); --no-check: by distance alone.",
        ),
    ] = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    drop_uncertain: DropUncertainOption = False,
    memory: Annotated[
        Optional[str],
        typer.Option(
            "--memory", metavar="SIZE",
            help="RAM for the kept set and the batches in flight (512M, 2G); past it the kept set spills to a "
            "folder beside --out, with the same result. \\[default: a quarter of the machine's memory, at most 1G]",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        Optional[bool],
        typer.Option(
            "--resume/--restart",
            help="Continue the interrupted run writing --out (it must exist), or start again. \\[default: continue "
            "one made with the same arguments and inputs]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Keep-first filter: write each document unless one kept before it (or in --against) is a near-duplicate.

    The fingerprint options default as for simq add; with --against, the index's settings apply.

    A killed run continues when run again: OUT.partial and OUT.resume hold what it committed.
    """
    reader = input_reader(jsonl, text_field, id_field, encoding, errors, keep_repeats=True)
    paths = reader.expand(inputs)
    for given in (out_path, dupes_file):
        if given is not None and given.exists() and any(p != "-" and os.path.samefile(p, given) for p, _ in paths):
            raise InvalidInput(f"{given} is also an input; write to another file")
    if dupes_file is not None and os.path.abspath(dupes_file) == os.path.abspath(out_path):
        raise InvalidInput("--dupes and --out name the same file")
    requested: dict[str, Any] = {"features": features, "ngram": ngram, "weights": weights, "hmm": hmm}
    budget = parse_memory(memory) if memory is not None else default_memory()
    to_stdout = str(out_path) == "-"
    with contextlib.ExitStack() as stack:
        index = stack.enter_context(SimhashIndex(against, readonly=True, **requested)) if against is not None else None
        chosen = {name: value for name, value in requested.items() if value is not None}
        settings = index.settings if index is not None else FingerprintSettings(**chosen)
        deduplicator = Deduplicator(k, settings, against=index, check=check, threshold=threshold,
                                    drop_uncertain=drop_uncertain, memory=budget,
                                    spill_near=None if to_stdout else str(out_path), line_rules=reader.line_rules())
        stack.callback(deduplicator.close)
        if index is not None and deduplicator.report.against_unsketched:
            say(
                f"{against}: {deduplicator.report.against_unsketched:,} of {deduplicator.report.against:,} documents "
                f"have no sketch (indexed before sketches, texts out of reach): a match with one is judged by distance "
                f"(within {fallback_k(deduplicator.k)})",
                to_stderr=True,
            )
        report = deduplicator.report
        # JSONL comes fingerprinted (and sketched when checking) from the reader, on every core.
        # (a chunk the C path read whole comes as one LineBatch: no object per record)
        entries = iter(reader.entry_batches(paths, deduplicator.settings, sketches=deduplicator.check))
        # Regular files (or none yet) are written resumably (pipeline/resume.py): OUT.partial, moved to OUT
        # at the end, so a run that fails leaves an earlier output as it was. stdout, devices and pipes are
        # written in place, and not resumed.
        resumable = not to_stdout and all(p is None or _regular_or_absent(p) for p in (out_path, dupes_file))
        committed: ResumableOutput | None = None
        outputs: list[output.ReplacedOnSuccess] = []
        if resumable:
            arguments = {"k": k, "check": check, "threshold": threshold, "drop_uncertain": drop_uncertain,
                         "settings": settings.describe(),
                         "against": None if against is None else os.path.abspath(against), "jsonl": jsonl,
                         "text_field": text_field, "id_field": id_field, "encoding": encoding, "errors": errors}
            committed = ResumableOutput(str(out_path), None if dupes_file is None else str(dupes_file), arguments,
                                        input_identity([p for p, _ in paths]))
            continuing = committed.open(resume)  # (a refusal leaves an interrupted run's files as they are)
            stack.callback(committed.abandon)
            if continuing and committed.decided:
                say(f"continuing the interrupted run writing {out_path}: {committed.decided:,} documents were "
                    "decided (--restart starts again)", to_stderr=True)
                deduplicator.prime(committed.kept_before(entries))
                entries = committed.rest(entries)
                committed.restore(report)
        elif resume:
            raise InvalidInput("--resume needs --out (and --dupes) to be files")
        else:
            outputs = [stack.enter_context(output.ReplacedOnSuccess(p)) for p in (out_path, dupes_file)
                       if p is not None and str(p) != "-"]
        sink = sys.stdout.buffer if to_stdout else (None if committed else outputs[0].handle)
        side = outputs[-1].handle if dupes_file is not None and outputs else None
        total = sum(size_of(p) for p, _ in paths) or None
        with output.progress("bytes", hidden=to_stdout and out.is_terminal) as progress:
            task = progress.add_task("", total=total)
            try:
                for decided in deduplicator.run_batches(entries):  # (the report counts each batch as decided)
                    if committed is not None:
                        committed.write(decided, decided.output(text_field, id_field),
                                        decided.dupe_lines() if dupes_file is not None and decided.dropped else b"")
                        committed.maybe_commit()
                    else:
                        sink.write(decided.output(text_field, id_field))  # type: ignore[union-attr]
                        if side is not None and decided.dropped:
                            side.write(decided.dupe_lines())
                    progress.update(
                        task, completed=reader.bytes_read,
                        description=f"{report.read:,} docs, {report.kept:,} kept, {report.dropped:,} dropped",
                    )
            except KeyboardInterrupt:
                if committed is not None:
                    committed.commit()
                    raise fail(f"interrupted after {committed.decided:,} documents; run the same command again to "
                               f"continue ({out_path}.partial holds the {committed.counts['kept']:,} kept so far)",
                               130) from None
                for written in outputs:
                    written.commit()
                raise fail(
                    f"interrupted after {report.read:,} documents; {out_path} holds the documents kept so far", 130
                ) from None
        if sink is not None:
            sink.flush()
        if not (reader.skip_count and not report.read):  # else the files stay as they were (the error below)
            if committed is not None:
                committed.finish()
            for written in outputs:
                written.commit()
        elif committed is not None:
            committed.discard()
    spilled = deduplicator.spill.bytes
    kept_texts = deduplicator.texts.bytes if deduplicator.texts is not None else 0
    print_reader_notes(reader)
    for skip in reader.skipped[:SHOWN_SKIPS]:
        warn("skipped", skip.where, ": ", skip.reason)
    share = report.dropped / report.read if report.read else 0.0
    say(
        f"{counted(report.read, 'document')}: {report.kept:,} kept, {report.dropped:,} dropped ({share:.1%}) "
        + _dedup_rule(deduplicator)
        + (f" against {report.against:,} indexed" if against is not None else "")
        + f", {reader.skip_count:,} skipped"
        + (f", {spilled / 2**20:,.0f} MiB of the kept set spilled to disk" if spilled else "")
        + (f", {kept_texts / 2**20:,.0f} MiB of kept texts on disk for the exact check"
           if kept_texts >= 1 << 20 else "")
        + f"; {report.seconds:.1f} s "
        f"(fingerprints {report.fingerprint_seconds:.1f} s, search {report.search_seconds:.1f} s, "
        f"{report.read / max(report.seconds, 1e-9):,.0f} documents/s)",
        to_stderr=True,
    )
    if reader.skip_count and not report.read:
        unchanged = [str(p) for p in (out_path, dupes_file) if p is not None and str(p) != "-"]
        raise fail(f"nothing read: {counted(reader.skip_count, 'input was', 'inputs were')} skipped (see above)"
                   + (f"; {' and '.join(unchanged)} left as {'they were' if len(unchanged) > 1 else 'it was'}"
                      if unchanged else ""))
    if any(skip.named for skip in reader.skipped):
        raise fail(f"{counted(reader.skip_count, 'input was', 'inputs were')} skipped (see above); the rest was "
                   "filtered")


def _regular_or_absent(path: Path) -> bool:
    return not path.exists() or path.is_file()


def _dedup_rule(deduplicator: Deduplicator) -> str:
    report = deduplicator.report
    if not deduplicator.check:
        return f"within k={deduplicator.k} (distance alone)"
    found = "sketch LSH candidates" if deduplicator.by_sketch else f"candidates within k={deduplicator.k}"
    rule = f"by {found} with Jaccard >= {deduplicator.threshold:g}"
    how = [f"{report.exact:,} by the exact Jaccard of the texts"] if report.exact else []
    how += [f"{report.estimated:,} by the sketches' estimate (a text out of reach)"] if report.estimated else []
    how += [f"{report.by_distance:,} by distance alone"] if report.by_distance else []
    return rule + (f" ({'; '.join(how)})" if how else "")


@commands.command("spark-dedup", rich_help_panel=DUPLICATES_PANEL)
@friendly_errors
def spark_dedup(
    input_path: Annotated[
        str,
        typer.Argument(
            metavar="INPUT", help="Parquet (file or folder) or JSONL with id and text columns.", show_default=False
        ),
    ],
    out_dir: Annotated[
        Path,
        typer.Option("--out", "-o", help="Output folder: Parquet tables, manifest.json, shards.", show_default=False),
    ],
    k: Annotated[
        Optional[int],
        typer.Option(
            "--k", "-k",
            help="With --check: pairs within this distance (0-10) instead of the sketches' LSH tables; with "
            f"--no-check: the largest distance of a pair. \\[default: {RECOMMENDED_K} with --no-check]",
            show_default=False,
        ),
    ] = None,
    id_field: Annotated[str, typer.Option("--id-field", help="Column holding the document id.")] = "id",
    text_field: Annotated[str, typer.Option("--text-field", help="Column holding the text.")] = "text",
    id_col: Annotated[Optional[str], typer.Option("--id-col", hidden=True, help="Old name of --id-field.")] = None,
    text_col: Annotated[
        Optional[str], typer.Option("--text-col", hidden=True, help="Old name of --text-field.")
    ] = None,
    input_format: Annotated[
        Optional[str],
        typer.Option("--input-format", help="'parquet' or 'jsonl'. \\[default: by suffix]", show_default=False),
    ] = None,
    old_input_format: Annotated[
        Optional[str], typer.Option("--format", hidden=True, help="Old name of --input-format.")
    ] = None,
    master: Annotated[
        Optional[str],
        typer.Option(
            help="Spark master: local[*], spark://host:7077, yarn... \\[default: local[*], or spark-submit's]",
            show_default=False,
        ),
    ] = None,
    keep_by: Annotated[
        Optional[str],
        typer.Option(
            "--keep-by",
            help="Keep the first document of a cluster by this column. \\[default: lowest id]",
            show_default=False,
        ),
    ] = None,
    descending: Annotated[
        bool, typer.Option("--descending", help="With --keep-by: keep the largest value instead.")
    ] = False,
    against: Annotated[
        Optional[Path],
        typer.Option("--against", help="An earlier run's --out: drop near-duplicates of its kept documents first."),
    ] = None,
    sqlite_shards: Annotated[
        int, typer.Option("--sqlite-shards", help="Also write this many SQLite index files (simq opens each).")
    ] = 0,
    blocks: Annotated[
        Optional[int],
        typer.Option(help="Blocks of the pair join. \\[default: 6 for k <= 3, k + 3 above]", show_default=False),
    ] = None,
    features: FeaturesOption = None,
    ngram: NgramOption = None,
    weights: WeightsOption = None,
    hmm: HmmOption = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an earlier output in --out.")] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Pair two documents by the rule of simq dedup (the exact Jaccard of the two texts; against an "
            "earlier run's documents, whose texts it does not keep, of two short texts, else the sketches' estimate, "
            "the verdict sure); --no-check: by distance alone.",
        ),
    ] = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    drop_uncertain: DropUncertainOption = False,
    conf: Annotated[
        Optional[list[str]],
        typer.Option("--conf", help="A Spark setting KEY=VALUE (repeatable), e.g. spark.sql.shuffle.partitions=64."),
    ] = None,
) -> None:
    """The kept documents of a corpus on Apache Spark, with its fingerprints, checked pairs and clusters.

    The same kept set as simq dedup on the same input (keep-first in input order, or by --keep-by)."""
    id_col, text_col = id_col or id_field, text_col or text_field
    input_format = input_format or old_input_format
    try:
        spark_job = importlib.import_module("simhash_sqlite.spark")  # pyspark only now: the base install has none
    except ImportError as exc:
        raise InvalidInput(str(exc)) from None
    requested: dict[str, Any] = {"features": features, "ngram": ngram, "weights": weights, "hmm": hmm}
    settings = FingerprintSettings(**{name: v for name, v in requested.items() if v is not None})
    settings_given = {}
    for item in conf or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidArgument(f"--conf takes KEY=VALUE, not {item!r}")
        settings_given[name.strip()] = value
    spark = spark_job.session(master or _default_master(), **settings_given)
    try:
        report = spark_job.run_dedup(
            spark, input_path, str(out_dir), settings=settings, k=k, check=check, threshold=threshold,
            drop_uncertain=drop_uncertain, blocks=blocks,
            id_col=id_col, text_col=text_col,
            fmt=input_format, keep_by=keep_by, descending=descending,
            against=None if against is None else str(against), sqlite_shards=sqlite_shards, overwrite=overwrite,
        )
    except spark_job.JOB_ERRORS as exc:
        raise InvalidInput(f"the Spark job failed: {spark_job.failure(exc)}") from None
    rows = {
        "documents": report.documents,
        "without features": report.without_features,
        "pairs (checked)" if check else f"pairs within {candidate_k(k, False)}": report.pairs,
        "clusters": report.clusters,
        "kept": report.kept,
    }
    if report.matched_existing is not None:
        rows[f"paired with {against}"] = report.matched_existing
    if report.shards:
        rows["sqlite shards"] = len(report.shards)
    rows["seconds"] = round(report.seconds, 1)
    output.render_one(rows, "table", cells={"seconds": lambda v: f"{v:.1f}"})
    say(f"{out_dir}: fingerprints, pairs, clusters, kept (Parquet) and manifest.json")


def _default_master() -> str | None:
    """local[*] when run directly; spark-submit's own --master when launched through it."""
    return None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[*]"

