"""The options several commands share (the same names, help and defaults wherever they appear), the
--help panels that group the commands, and the defaults they show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..core.settings import CONFIRM_K, RECOMMENDED_K
from . import output

INDEX_PANEL = "Build and keep the index"
SEARCH_PANEL = "Search"
DUPLICATES_PANEL = "Near-duplicates of a whole corpus"
SQL_PANEL = "SQL and the browser"

DEFAULT_DB = "simhash.db"
SHOWN_SKIPS = 20
SHOWN_ROWS = 50  # a table shows at most this many rows; the other formats print every record


def _complete_formats(incomplete: str) -> list[str]:
    return [name for name in output.FORMATS if name.startswith(incomplete)]


DbOption = Annotated[
    Path,
    typer.Option("--db", envvar="SIMQ_DB", help="The index file.", show_default=True),
]
KOption = Annotated[int, typer.Option("--k", "-k", help="Largest Hamming distance to report (0-64).", min=0, max=64)]
FormatOption = Annotated[
    Optional[str],
    typer.Option(
        "--format",
        help="table, json, jsonl, csv or tsv. \\[default: table]",
        show_default=False,
        autocompletion=_complete_formats,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Short for --format json.")]
OutOption = Annotated[
    Optional[Path],
    typer.Option(
        "--out", "-o", help="Write the records to this file instead of stdout. \\[default: stdout]", show_default=False
    ),
]
CandidateKOption = Annotated[
    Optional[int],
    typer.Option(
        "--k", "-k",
        help=f"Largest Hamming distance of a candidate (0-64). "
        f"\\[default: {CONFIRM_K} with --check, {RECOMMENDED_K} with --no-check]",
        show_default=False, min=0, max=64,
    ),
]
CheckOption = Annotated[
    bool,
    typer.Option(
        "--check/--no-check",
        help="Keep a candidate only if its 5-shingle Jaccard (of the normalised texts) reaches --threshold: exact "
        "where both texts can be read (stored with --store-text, short texts' exact data, unchanged files and JSONL "
        "lines), else estimated from the stored sketches; one without either is kept if within min(k, "
        f"{RECOMMENDED_K}). Candidates the sketches are sure fall below it are dropped unread.",
    ),
]
ThresholdOption = Annotated[
    float, typer.Option("--threshold", help="With --check: the least Jaccard kept (above 0, at most 1).")
]
# dedup and spark-dedup: when unsure, keep, unless asked.
DropUncertainOption = Annotated[
    bool,
    typer.Option(
        "--drop-uncertain",
        help="Drop on an uncertain verdict too (an estimate short of certainty 0.999, or distance alone: "
        f"a document without a sketch or short text, within min(k, {RECOMMENDED_K})); by default, when unsure, keep.",
    ),
]
# The options of commands that read inputs (add, dedup): the same names, help and defaults.
JsonlOption = Annotated[
    Optional[bool],
    typer.Option(
        "--jsonl/--no-jsonl",
        help="Read every input as JSONL, or stdin as one text. \\[default: *.jsonl and *.ndjson files are JSONL, "
        "and stdin is when its first lines are JSON objects]",
        show_default=False,
    ),
]
RequireIdOption = Annotated[
    bool, typer.Option("--require-id", help="Skip JSONL records without the id field (else keyed FILE:LINE).")
]
TextFieldOption = Annotated[str, typer.Option(help="JSONL field holding the text.")]
IdFieldOption = Annotated[str, typer.Option(help="JSONL field holding the key.")]
EncodingOption = Annotated[str, typer.Option(help="Encoding of the input files.")]
ErrorsOption = Annotated[
    str, typer.Option(help="On undecodable bytes: 'strict' (skip the file), 'replace', 'ignore' or 'backslashreplace'.")
]
# The same for the one file of near -f and hash -f.
FileEncodingOption = Annotated[str, typer.Option(help="Encoding of --file.")]
FileErrorsOption = Annotated[
    str, typer.Option(help="On undecodable bytes in --file: 'strict' (an error), 'replace', 'ignore' or "
                      "'backslashreplace'.")
]
# The fingerprint options, with the same names, help and defaults wherever a command makes fingerprints.
# None means "the index's" for an existing index; the shown default is what a new one gets.
FeaturesOption = Annotated[
    Optional[str], typer.Option(help="'chars' or 'words' n-grams. \\[default: chars]", show_default=False)
]
NgramOption = Annotated[Optional[int], typer.Option(help="n of the n-grams. \\[default: 5]", show_default=False)]
WeightsOption = Annotated[
    Optional[str], typer.Option(help="'binary', 'count' or 'log'. \\[default: binary]", show_default=False)
]
HmmOption = Annotated[
    Optional[bool],
    typer.Option("--hmm/--no-hmm", help="jieba's HMM for words. \\[default: no-hmm]", show_default=False),
]
