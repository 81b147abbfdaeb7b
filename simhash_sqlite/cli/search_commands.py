"""simq's searches: near (one query or a file of them), hash (a text's fingerprint), explain (one pair)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..core.fingerprint import from_hex, simhash, to_hex, to_signed
from ..core.settings import DEFAULT_THRESHOLD, FingerprintSettings, default_k
from ..errors import InvalidArgument, InvalidInput
from ..find.queries import FailedQuery, guess_format, parse_queries
from ..find.search import executed_sql, near_sql
from ..find.verdict import CheckSummary, validate_threshold
from ..index import SimhashIndex
from ..quick.words import match_json
from ..store import texts
from ..store.documents import FingerprintedDocument
from . import output
from .errors import fail, friendly_errors
from .options import (
    DEFAULT_DB,
    SEARCH_PANEL,
    SHOWN_SKIPS,
    CandidateKOption,
    CheckOption,
    DbOption,
    FileEncodingOption,
    FileErrorsOption,
    FormatOption,
    JsonOption,
    OutOption,
    ThresholdOption,
)
from .output import err, out, plain
from .reports import counted, print_check_summary, print_matches, say, tell_sketch_upgrade, verdict_json, warn

if TYPE_CHECKING:
    from ..analysis.explain import Explanation

# Imported where a command needs them, not by every command line of this module: explain's analysis and the
# file reader (pipeline.sources: the pool, the writer) are a third of `simq near --key`'s and `simq hash`'s
# start-up (bench/startup.py).
STDIN = "-"  # as pipeline.sources.STDIN: stdin in place of a file or text

commands = typer.Typer()  # this module's commands; app.py lists them all, in --help's order


@commands.command(rich_help_panel=SEARCH_PANEL)
@friendly_errors
def near(
    text: Annotated[Optional[str], typer.Argument(help="The text to search for.", show_default=False)] = None,
    db: DbOption = Path(DEFAULT_DB),
    k: CandidateKOption = None,
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="Search for this file's text.")] = None,
    key: Annotated[Optional[str], typer.Option(help="Search for a stored document's neighbours.")] = None,
    hash_: Annotated[Optional[str], typer.Option("--hash", help="Search for a 16-hex-digit fingerprint.")] = None,
    batch: Annotated[
        Optional[str],
        typer.Option(
            help="Many queries: a JSONL file (text, hash or key per line, optional id) or a file of paths, "
            "- for stdin; answers one JSON line per query.",
        ),
    ] = None,
    batch_format: Annotated[
        Optional[str],
        typer.Option(
            help="'jsonl' or 'paths'. \\[default: jsonl for *.jsonl and stdin, else paths]", show_default=False
        ),
    ] = None,
    limit: Annotated[
        Optional[int],
        typer.Option(help="At most this many results (per query). \\[default: no limit]", show_default=False, min=0),
    ] = None,
    plan: Annotated[
        Optional[str],
        typer.Option(
            help="Force 'index' (block lookups) or 'scan'; the answer is the same. \\[default: the cheaper]",
            show_default=False,
        ),
    ] = None,
    format_: FormatOption = None,
    as_json: JsonOption = False,
    output_path: OutOption = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show the plan, the candidates checked, and the SQL.")
    ] = False,
    check: CheckOption = True,
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    encoding: FileEncodingOption = "utf-8",
    errors: FileErrorsOption = "strict",
) -> None:
    """Near-duplicates of a text, a file, a stored key or a fingerprint, closest first.

    Candidates within k, checked by the exact Jaccard of the texts where they can be read, else
    estimated from the stored sketches."""
    format_ = output.choose_format(format_, as_json)
    checked_at = validate_threshold(threshold) if check else None  # the batch's threshold; None: unchecked
    k = default_k(check) if k is None else k  # validated by its option (0-64)
    if batch is not None:
        if any(x is not None for x in (text, file, key, hash_)):
            raise InvalidArgument("--batch reads its queries from the file; give no text, --file, --key or --hash")
        if format_ not in ("table", "jsonl", "json"):
            raise InvalidArgument("--batch answers in JSON: one line per query (jsonl, the default) or an array (json)")
        with output.destination(output_path) as handle:
            _near_batch(db, batch, batch_format, k, limit, plan, explain, checked_at, format_, handle)
        return
    if sum(x is not None for x in (text, file, key, hash_)) != 1:  # before the index is opened: a usage error
        raise InvalidArgument("give one of a text, --file, --key, --hash or --batch to search for")
    if text == STDIN and file is None:
        text, file = None, Path(STDIN)  # as -f -
    elif text is not None and file is None and "\n" not in text and os.path.isfile(text):
        warn("note", text, " is a file, but the text ", repr(text), " itself is searched for; to search for what "
             "the file holds: --file ", text)
    try:
        fingerprint = from_hex(hash_, whole=True) if hash_ is not None else None
    except InvalidInput as exc:
        raise InvalidArgument(f"--hash: {exc}") from None
    report = None
    with SimhashIndex(db, readonly=True) as index:  # a search never writes (nor upgrades: see vacuum)
        tell_sketch_upgrade(index)
        if file is not None:
            text, fingerprint = _query_of_file(file, index.settings, text, fingerprint, encoding, errors)
        result = index.search(
            text, fingerprint=fingerprint, key=key, k=k, limit=limit, plan=plan,
            check=check, threshold=threshold,
        )
        matches, report = result.matches, result.report
        if explain:
            err.print(f"plan: {result.plan.describe()}", markup=False)
            err.print(f"candidates checked: {result.candidates:,}", markup=False)
            err.print(executed_sql(result.plan), markup=False, soft_wrap=True)
            err.print("-- the same answer in one statement (near_sql()):", markup=False)
            err.print(near_sql(result.plan), markup=False, soft_wrap=True)
    # A query too large to read whole has said why its candidates go by distance (_query_of_file): no hint.
    print_matches([match_json(m) for m in matches], report, k, format_, output_path,
                  hint=not (file is not None and text is None))


def _near_batch(
    db: Path,
    source: str,
    fmt: Optional[str],
    k: int,
    limit: Optional[int],
    plan: Optional[str],
    explain: bool,
    threshold: Optional[float],
    format_: str,
    handle,
) -> None:
    """One JSON answer per query line, in order (jsonl, or a json array); bad lines answer with
    "error". threshold: check the matches exactly (None: by distance alone)."""
    fmt = fmt or guess_format(source)
    # Binary: each line is decoded on its own (queries.parse_queries), so a line that is not UTF-8 is answered
    # with its error and the next ones are still read.
    stream = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    failed = answered = 0
    plans: dict[str, int] = {}
    candidates = 0
    total = CheckSummary(k, threshold or DEFAULT_THRESHOLD)

    def answers_of(index: SimhashIndex):
        nonlocal failed, answered, candidates
        queries = parse_queries(stream, fmt)
        answers = index.near_many(
            queries, k=k, limit=limit, plan=plan,
            check=threshold is not None, threshold=threshold or DEFAULT_THRESHOLD,
        )
        for query, answer in answers:
            answered += 1
            record: dict = {"id": query.id}
            if isinstance(answer, FailedQuery):
                failed += 1
                record["error"] = answer.message
                if failed <= SHOWN_SKIPS:
                    warn("skipped", answer.message)
            else:
                matches = answer.matches
                if answer.report is not None:
                    total.add(answer.report)
                record["fingerprint"] = to_hex(answer.fingerprint)
                record["matches"] = [match_json(m) for m in matches]
                if explain:
                    record["plan"], record["candidates"] = answer.plan.kind, answer.candidates
                    plans[answer.plan.kind] = plans.get(answer.plan.kind, 0) + 1
                    candidates += answer.candidates
            yield record

    try:
        with SimhashIndex(db, readonly=True) as index:
            tell_sketch_upgrade(index)
            output.render(answers_of(index), "json" if format_ == "json" else "jsonl", handle)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if explain:
        used = ", ".join(f"{kind} {count:,}" for kind, count in sorted(plans.items())) or "none"
        say(
            f"{counted(answered, 'query', 'queries')}; plans: {used}; candidates checked: {candidates:,}",
            to_stderr=True,
        )
    if threshold is not None:
        print_check_summary(
            total, "match", suffix=f" of {counted(answered - failed, 'query', 'queries')}", to_stderr=True
        )
    if failed:
        queries = counted(answered, "query", "queries")
        raise fail(f"{failed:,} of {queries} could not be searched (see their \"error\" lines)")


def _query_of_file(
    path: Path, settings: FingerprintSettings, text: Optional[str], fingerprint: Optional[int],
    encoding: str = "utf-8", errors: str = "strict",
) -> tuple[Optional[str], Optional[int]]:
    """(text, fingerprint) to search for a file's contents (- for stdin): the text, or for a text too
    large to read whole, its fingerprint (made in pieces), said on stderr."""
    if text is not None or fingerprint is not None:
        raise InvalidInput("give one of a text, --file, --key or --hash")
    from ..pipeline.sources import read_one, size_text

    document = read_one(str(path), settings, encoding=encoding, errors=errors)
    if not isinstance(document, FingerprintedDocument):
        return document.text, None
    if document.fingerprint is None:
        raise InvalidInput(f"{path} has no features (no letters or digits) to search with")
    warn("note", str(path), f" is over {size_text(texts.READ_WHOLE_BYTES)}: searched by its fingerprint, "
         "made piece by piece; its text is not read whole, so candidates are judged by distance alone")
    return None, document.fingerprint


@commands.command("hash", rich_help_panel=SEARCH_PANEL)
@friendly_errors
def hash_command(
    text: Annotated[
        Optional[str], typer.Argument(help="The text to fingerprint (- reads stdin).", show_default=False)
    ] = None,
    db: DbOption = Path(DEFAULT_DB),
    file: Annotated[Optional[Path], typer.Option("--file", "-f", help="Fingerprint this file's text.")] = None,
    signed: Annotated[bool, typer.Option("--signed", help="Print the signed int64 that SQLite stores.")] = False,
    format_: FormatOption = None,
    as_json: JsonOption = False,
    encoding: FileEncodingOption = "utf-8",
    errors: FileErrorsOption = "strict",
) -> None:
    """Print a text's fingerprint (16 hex digits), with the index's settings if the index exists.

    The table format prints the bare value; the others a record with the hex and the signed forms.
    A text of - reads stdin, as --file - does.
    """
    format_ = output.choose_format(format_, as_json)
    if text == STDIN and file is None:
        text, file = None, Path(STDIN)  # as -f -, and as near -
    if (text is None) == (file is None):
        raise InvalidArgument("give a text or --file (one of them)")
    settings = FingerprintSettings()
    if db.exists():
        with SimhashIndex(db, readonly=True) as index:
            settings = index.settings
    if file is not None:
        from ..pipeline.sources import read_one

        document = read_one(str(file), settings, encoding=encoding, errors=errors)
        if isinstance(document, FingerprintedDocument):  # streamed
            fingerprint = document.fingerprint
        else:
            fingerprint = simhash(document.text, settings)
    else:
        assert text is not None  # one of them, checked above
        fingerprint = simhash(text, settings)
    if fingerprint is None:
        raise InvalidInput("the text has no features (no letters or digits)")
    if format_ == "table":
        print(to_signed(fingerprint) if signed else to_hex(fingerprint))
    else:
        output.render_one({"fingerprint": to_hex(fingerprint), "signed": to_signed(fingerprint)}, format_)


@commands.command("explain", rich_help_panel=SEARCH_PANEL)
@friendly_errors
def explain_command(
    a: Annotated[str, typer.Argument(help="A key in the index, or a file.", show_default=False)],
    b: Annotated[str, typer.Argument(help="Another key, or a file.", show_default=False)],
    db: DbOption = Path(DEFAULT_DB),
    top: Annotated[int, typer.Option(help="Features to show in each list.", min=1)] = 8,
    format_: FormatOption = None,
    as_json: JsonOption = False,
) -> None:
    """Why two documents are (or are not) near-duplicates: distance, Jaccard, features, a diff.

    json, jsonl, csv and tsv print one record (lists as JSON in csv and tsv cells).
    """
    from ..analysis.explain import explain as explain_pair

    format_ = output.choose_format(format_, as_json)
    with SimhashIndex(db, readonly=True) as index:
        result = explain_pair(index, a, b, top=top)
    if format_ == "table":
        _print_explanation(result)
    else:
        output.render_one(_explanation_json(result), format_)


def _explanation_json(e: Explanation) -> dict:
    def feats(items):
        return [{"feature": f.text, "weight": f.weight, "count": f.count} for f in items]

    return {
        "a": e.a.name, "b": e.b.name,
        "fingerprints": [None if s.fingerprint is None else to_hex(s.fingerprint) for s in (e.a, e.b)],
        "distance": e.distance, "similarity": e.similarity, "estimated_jaccard": e.estimated_jaccard,
        "exact_jaccard": e.exact_jaccard, **verdict_json(e.verdict), "shared": feats(e.shared),
        "only_a": feats(e.only_a),
        "only_b": feats(e.only_b), "diff": e.diff, "notes": e.notes,
    }


def _verdicts(e: Explanation):
    from ..analysis.explain import verdicts

    return verdicts(e)


def _print_explanation(e: Explanation) -> None:
    def num(x):
        return "-" if x is None else f"{x:.3f}"

    summary = {
        "fingerprints": " / ".join("-" if s.fingerprint is None else to_hex(s.fingerprint) for s in (e.a, e.b)),
        "distance": "-" if e.distance is None else f"{e.distance} of 64 bits",
        "similarity (1 - d/64)": num(e.similarity),
        "5-shingle Jaccard estimated from the sketches": num(e.estimated_jaccard),
        "exact 5-shingle Jaccard": num(e.exact_jaccard),
        "features": e.settings.describe(),
        **dict(_verdicts(e)),
    }
    output.render_one(summary, "table", title=f"{e.a.name}  vs  {e.b.name}")
    if e.shared or e.only_a or e.only_b:
        rows = max(len(e.shared), len(e.only_a), len(e.only_b))
        cells = [[f"{f.text!r} {f.weight}x{f.count}" for f in items] + [""] * (rows - len(items))
                 for items in (e.shared, e.only_a, e.only_b)]
        output.render(
            zip(*cells), "table", columns=["shared", f"only in {e.a.name}", f"only in {e.b.name}"],
            title="Heaviest features (weight x count)",
        )
    for diff_line in e.diff:
        style = (
            "green" if diff_line.startswith("+") else "red" if diff_line.startswith("-")
            else "dim" if diff_line.startswith("@") else None
        )
        out.print(plain(diff_line, style), soft_wrap=True)
    for note in e.notes:
        warn("note", note)

