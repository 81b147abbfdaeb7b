"""What several commands print beside their records: counts in words, warnings and summary lines, the
check's summary, the sketch upgrade an index could use, progress, a verdict as JSON.
"""

from __future__ import annotations

import os

from ..core.settings import CONFIRM_K, RECOMMENDED_K, FingerprintSettings
from ..find.verdict import CheckSummary
from ..index import SimhashIndex
from .output import err, line, out, plain


def warn(label: str, *parts: str) -> None:
    """A yellow label and a message of user data on stderr, one line."""
    err.print(line((label, "yellow"), " ", *parts), soft_wrap=True)


def say(message: str, *, to_stderr: bool = False) -> None:
    """A summary line (of user data: paths, keys) on stdout, or stderr."""
    (err if to_stderr else out).print(plain(message), soft_wrap=True)


def counted(n: int, one: str, many: str | None = None) -> str:
    """'1 pair', '2 pairs', '1 match', '2 matches': a count and its noun, singular for exactly one."""
    if n == 1:
        return f"1 {one}"
    return f"{n:,} {many or one + ('es' if one.endswith(('s', 'x', 'ch', 'sh')) else 's')}"


def tell_sketch_upgrade(index: SimhashIndex) -> None:
    """Say what opening an index made before sketches did (for writing: which documents could not be
    sketched), or lacks (for a search, which never writes: how to sketch them); and, for an index made
    before the root of its keys was recorded, that its files are out of reach from this folder."""
    if index.key_root is None and _keys_out_of_reach(index):
        say(f"{index.path}: made before simq recorded where its file keys are rooted, so they are read from the "
            f"current folder ({os.getcwd()}), where they are not: run simq from the folder it was built in for "
            "exact checks of their texts", to_stderr=True)
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


def _keys_out_of_reach(index: SimhashIndex) -> bool:
    """Some of the first relative keys whose texts live in files, and none of them a file from here."""
    keys = [key for (key,) in index.conn.execute(
        "SELECT key FROM documents WHERE text IS NULL AND content_hash IS NOT NULL LIMIT 100"
    ) if not os.path.isabs(key)]
    return bool(keys) and not any(os.path.isfile(key) for key in keys)


def print_check_summary(
    report: CheckSummary, noun: str, *, to_stderr: bool, suffix: str = "", hint: bool = True
) -> None:
    """How many results were checked exactly, by the sketches' estimate and by distance only, how many
    verdicts were uncertain, and a hint when texts were out of reach. Nothing when there was no candidate."""
    if not report.candidates:
        return
    dropped = report.rejected + report.estimate_rejected + report.too_far
    say(
        f"{counted(report.kept, noun)}{suffix}: {report.checked:,} checked exactly (Jaccard >= {report.threshold:g}), "
        f"{report.estimated:,} by the sketches' estimate, "
        f"{report.unchecked:,} by distance only (<= {report.fallback_k}); "
        f"{dropped:,} of {counted(report.candidates, 'candidate')} {report.found_by} dropped; "
        f"{counted(report.sure, 'verdict')} sure from the sketches alone, {report.uncertain:,} uncertain",
        to_stderr=to_stderr,
    )
    missing = report.unchecked + report.too_far
    if report.uncertain and hint:
        warn(
            "hint",
            f"{report.uncertain:,} verdict{'s rest' if report.uncertain != 1 else ' rests'} on an uncertain "
            "estimate, the texts being out of reach: list them with simq dupes --uncertain to review them, or add "
            "the documents with --store-text, or again from files and JSONL files left where they are, for exact "
            "checks",
        )
    if missing and hint:
        warn(
            "hint",
            f"{missing:,} candidate{'s were' if missing != 1 else ' was'} judged by distance alone, "
            "a text and a sketch being out of reach (documents indexed before sketches whose texts are gone, or "
            "bare fingerprints): add them again, with --store-text or from files kept unchanged at their paths"
            + ("; a --hash query has no text (search with the text, --file or --key)"
               if report.without_query_text else ""),
        )


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

