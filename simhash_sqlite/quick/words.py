"""What simq says, in words and plain text, without rich, typer or numpy: counts in words, the check's
summary and its hints, the note on an index's file keys, a match as JSON, a JSON line, and the table rich
draws when its output is not a terminal. cli/reports.py and cli/output.py print these through rich; lane.py
writes them itself where the output is the same byte for byte (tests/test_quick_lane.py holds both equal), so
that `simq near --key` and `simq hash` start without those imports (bench/startup.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from ..errors import printable
from ..find.match import Match
from ..find.summary import CheckSummary

# Line breaks that JSON leaves raw but str.splitlines() and some JSONL readers split on: escaped, so
# that a JSON line is one line to every reader. (Raw, they can only be inside strings: safe to replace.)
RAW_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def json_text(value: object) -> str:
    """A value as one line of JSON (UTF-8 as is, the raw breaks escaped); bytes as hex, paths as strings."""
    return json.dumps(value, ensure_ascii=False, default=_json_default).translate(RAW_BREAKS)


def _json_default(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def counted(n: int, one: str, many: str | None = None) -> str:
    """'1 pair', '2 pairs', '1 match', '2 matches': a count and its noun, singular for exactly one."""
    if n == 1:
        return f"1 {one}"
    return f"{n:,} {many or one + ('es' if one.endswith(('s', 'x', 'ch', 'sh')) else 's')}"


def hex_of(fingerprint: int) -> str:
    """16 hex digits, as core.fingerprint.to_hex writes an unsigned fingerprint (which imports numpy)."""
    return f"{fingerprint & ((1 << 64) - 1):016x}"


def check_json(jaccard: float | None, checked_by: str | None, certainty: float | None) -> dict:
    """The check's fields of a JSON row: "jaccard" (null: not measured), "checked", "checked_by" (how it was
    judged) and "certainty"."""
    return {
        "jaccard": None if jaccard is None else round(jaccard, 4),
        "checked": jaccard is not None,
        "checked_by": checked_by,
        "certainty": None if certainty is None else round(certainty, 4),
    }


def match_json(match: Match) -> dict:
    """A match as JSON: its key, distance and similarity, the check's fields (check_json), its fingerprint."""
    return {
        "key": match.key,
        "distance": match.distance,
        "similarity": round(match.similarity, 4),
        **check_json(match.jaccard, match.checked_by, match.certainty),
        "fingerprint": hex_of(match.fingerprint),
    }


def keys_out_of_reach_note(path: str) -> str:
    """What a search says of an index made before the root of its keys was recorded whose files are not
    here (store.texts.file_keys_out_of_reach)."""
    return (f"{path}: made before simq recorded where its file keys are rooted, so they are read from the "
            f"current folder ({os.getcwd()}), where they are not: run simq from the folder it was built in for "
            "exact checks of their texts")


def check_summary(report: CheckSummary, noun: str, suffix: str = "") -> str:
    """The check's summary line (printed only when there was a candidate)."""
    dropped = report.rejected + report.estimate_rejected + report.too_far
    return (
        f"{counted(report.kept, noun)}{suffix}: {report.checked:,} checked exactly (Jaccard >= {report.threshold:g}), "
        f"{report.estimated:,} by the sketches' estimate, "
        f"{report.unchecked:,} by distance only (<= {report.fallback_k}); "
        f"{dropped:,} of {counted(report.candidates, 'candidate')} {report.found_by} dropped; "
        f"{counted(report.sure, 'verdict')} sure from the sketches alone, {report.uncertain:,} uncertain"
    )


def check_hints(report: CheckSummary) -> list[str]:
    """The hints after the summary (each printed as `hint MESSAGE` on stderr): uncertain verdicts, and
    candidates judged by distance alone."""
    hints = []
    missing = report.unchecked + report.too_far
    if report.uncertain:
        hints.append(
            f"{report.uncertain:,} verdict{'s rest' if report.uncertain != 1 else ' rests'} on an uncertain "
            "estimate, the texts being out of reach: list them with simq dupes --uncertain to review them, or add "
            "the documents with --store-text, or again from files and JSONL files left where they are, for exact "
            "checks"
        )
    if missing:
        hints.append(
            f"{missing:,} candidate{'s were' if missing != 1 else ' was'} judged by distance alone, "
            "a text and a sketch being out of reach (documents indexed before sketches whose texts are gone, or "
            "bare fingerprints): add them again, with --store-text or from files kept unchanged at their paths"
            + ("; a --hash query has no text (search with the text, --file or --key)"
               if report.without_query_text else "")
        )
    return hints


# rich's HEAVY_HEAD box, as output.SimqConsole draws a table when stdout is not a terminal: no wrapping (the
# width is output.PIPED_WIDTH), no colour, each column as wide as its widest cell, one space either side.
_TOP, _HEAD, _RULE, _ROW, _BOTTOM = ("┏━┳┓", "┃ ┃┃", "┡━╇┩", "│ ││", "└─┴┘")


def table_cell(value: object) -> str:
    """output.table_cell's text, for the values of a match (None, numbers, strings)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.3f}"
    return printable(value)


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str | None:
    """The table's lines as rich draws them to a pipe, or None where that takes rich's own measuring (a
    cell that is not printable ASCII: wide characters, combining marks)."""
    cells = [list(columns), *([*row] for row in rows)]
    if not all(cell.isascii() and cell.isprintable() for row in cells for cell in row):
        return None
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]

    def rule(box: str) -> str:
        return box[0] + box[2].join(box[1] * (w + 2) for w in widths) + box[3] + "\n"

    def line(box: str, row: list[str]) -> str:
        return box[0] + box[2].join(f" {cell.ljust(w)} " for cell, w in zip(row, widths)) + box[3] + "\n"

    return "".join([rule(_TOP), line(_HEAD, cells[0]), rule(_RULE), *(line(_ROW, row) for row in cells[1:]),
                    rule(_BOTTOM)])
