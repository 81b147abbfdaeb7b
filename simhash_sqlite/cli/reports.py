"""What several commands print beside their records: counts in words, warnings and summary lines, the
check's summary, the sketch upgrade an index could use, progress, a verdict as JSON.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..core.settings import CONFIRM_K, RECOMMENDED_K, FingerprintSettings
from ..quick.words import check_hints, check_summary, counted, keys_out_of_reach_note
from . import output
from .output import say, warn

if TYPE_CHECKING:  # (types only: the quick lane prints matches through here without the index's imports)
    from ..find.verdict import CheckSummary
    from ..index import SimhashIndex

__all__ = ["say", "warn"]  # (re-exported: the commands take them from here)


def tell_sketch_upgrade(index: SimhashIndex) -> None:
    """Say what opening an index made before sketches did (for writing: which documents could not be
    sketched), or lacks (for a search, which never writes: how to sketch them); and, for an index made
    before the root of its keys was recorded, that its files are out of reach from this folder."""
    from ..store.texts import file_keys_out_of_reach

    if index.key_root is None and file_keys_out_of_reach(index.conn):
        say(keys_out_of_reach_note(index.path), to_stderr=True)
    if index.made_before_sketches:
        say(f"{index.path}: made before sketches, and a search does not write them: pairs are found within "
            "k and judged exactly where texts can be read, else by distance alone; sketch them once with "
            f"simq vacuum --db {index.path}", to_stderr=True)
    if index.sketch_upgrade is None:
        return
    sketched, out_of_reach = index.sketch_upgrade
    say(
        f"{index.path}: made before sketches; {counted(sketched, 'document')} sketched from their texts"
        + (f", {out_of_reach:,} could not be (texts not stored and files changed or gone): their pairs are "
           "judged by distance alone" if out_of_reach else ""),
        to_stderr=True,
    )


def print_check_summary(
    report: CheckSummary, noun: str, *, to_stderr: bool, suffix: str = "", hint: bool = True
) -> None:
    """How many results were checked exactly, by the sketches' estimate and by distance only, how many
    verdicts were uncertain, and a hint when texts were out of reach. Nothing when there was no candidate."""
    if not report.candidates:
        return
    say(check_summary(report, noun, suffix), to_stderr=to_stderr)
    if hint:
        for told in check_hints(report):
            warn("hint", told)


def print_matches(
    records: Sequence[Mapping[str, object]], report: CheckSummary | None, k: int, format_: str,
    output_path: str | os.PathLike | None = None, *, hint: bool = True,
) -> None:
    """What near prints for its matches (match_json records, closest first): the records in format_ (a table
    with the verdict's columns, or the fingerprint's where nothing was checked) to stdout or -o's file, or the
    line that there are none, then the check's summary. The full command and the quick lane on a terminal
    (quick/lane.py, through __main__) print by this one function."""
    if format_ != "table":
        with output.destination(output_path) as handle:
            output.render(records, format_, handle)
    elif not records:
        none_checked = report is not None and report.candidates
        say("no match passed the check" if none_checked else f"no documents within distance {k}")
    else:
        # Checked: the verdict takes the fingerprint's place (json has both), so keys keep their width.
        last = ["jaccard", "checked_by", "certainty"] if report is not None else ["fingerprint"]
        with output.destination(output_path) as handle:
            output.render(records, "table", handle, columns=["key", "distance", "similarity", *last], fold=["key"])
    if report is not None:
        print_check_summary(report, "match", to_stderr=format_ != "table" or output_path is not None, hint=hint)


def recommended_k(settings: FingerprintSettings) -> str:
    if settings == FingerprintSettings():
        return f"{k_uses()}; this index's: simq calibrate"
    return f"not measured for these settings (the defaults': {k_uses()}); measure: simq calibrate"


def k_uses() -> str:
    """What each default k is for, said the same way by stats and calibrate (the one story of k)."""
    return (f"{RECOMMENDED_K} for distance alone (--no-check: where F1 peaks on the quality benchmark), "
            f"{CONFIRM_K} for candidates checked by Jaccard (the default of near, dupes -k)")


def verdict_json(verdict) -> dict:
    """The check's verdict as the fields every JSON row has: jaccard, checked, checked_by, certainty, and
    duplicate (the verdict itself)."""
    if verdict is None:
        return {"jaccard": None, "checked": False, "checked_by": None, "certainty": None, "duplicate": False}
    return {
        "jaccard": None if verdict.jaccard is None else round(verdict.jaccard, 4),
        "checked": verdict.jaccard is not None,
        "checked_by": verdict.checked_by,
        "certainty": None if verdict.certainty is None else round(verdict.certainty, 4),
        "duplicate": verdict.keeps,
    }


def progress_to(progress, task):
    """An on_progress(done, total) callback that moves a task of an output.progress() display."""
    return lambda done, total: progress.update(task, completed=done, total=total)

