"""The settings an index records in simhash_meta, validated on open: each key's value with its type and
bounds. A value changed by other software or by hand is refused naming the key (errors.InvalidMetadata),
never met later as a traceback or an allocation sized by it. `simq integrity` reports the same findings."""

from __future__ import annotations

import json
import os

from ..core.rule import SHORT_TEXT_FORMAT
from ..core.settings import FingerprintSettings
from ..core.sketch import SketchScheme
from ..errors import InvalidInput, InvalidMetadata

# The keys whose values shape what every command does. 'clusters' (the last clustering run, rewritten by each)
# is validated where it is read (find/clusters.clustering_info), so that `simq clusters` can always record it again.
TEXT_KEYS = ("created_with", "jieba_version")
# Which member represents a cluster (find/clusters.py), as a clusters record names it.
REPRESENTATIVE_RULES = ("first", "last", "longest", "shortest")


def fingerprint_problem(value: str) -> str | None:
    try:
        FingerprintSettings.from_json(value)
    except InvalidInput as exc:
        return str(exc)
    return None


def sketch_problem(value: str) -> str | None:
    try:
        SketchScheme.recorded(value)
    except ValueError as exc:
        return str(exc)
    return None


def store_text_problem(value: str) -> str | None:
    return None if value in ("0", "1") else f"must be 0 or 1, not {value[:40]!r}"


def key_root_problem(value: str) -> str | None:
    if not os.path.isabs(value) or "\x00" in value:
        return f"must be an absolute folder path, not {value[:40]!r}"
    return None


def short_texts_problem(value: str) -> str | None:
    """The exact data of short texts an index keeps (core/short_texts.py): {"bytes": the cut, "format":
    SHORT_TEXT_FORMAT}, and "from_id" where it began keeping them after its first documents. A format this
    version does not read is refused, not misread."""
    try:
        info = json.loads(value)
    except (ValueError, TypeError, RecursionError):
        return "not JSON"
    if not isinstance(info, dict):
        return "not a JSON object"
    unknown = sorted(set(info) - {"bytes", "format", "from_id"})
    if unknown:
        return f"unknown short text settings: {', '.join(unknown)}"

    def whole(x) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if not whole(info.get("format")) or info["format"] != SHORT_TEXT_FORMAT:
        return f"format must be {SHORT_TEXT_FORMAT}, not {info.get('format')!r:.40}"
    if not whole(info.get("bytes")) or info["bytes"] < 1:
        return f"bytes must be a whole number above 0, not {info.get('bytes')!r:.40}"
    if "from_id" in info and not (whole(info["from_id"]) and info["from_id"] >= 0):
        return f"from_id must be a whole number, not negative, not {info['from_id']!r:.40}"
    return None


# The loadable extension (native/sqlite_extension.c, read_settings) applies the same rules, in this order,
# and refuses the same files: tests/test_extension_rule.py runs one table of tampered files through both.
# key_root alone is not read there: it only says where simq finds the files of relative keys.
CHECKS = {
    "fingerprint": fingerprint_problem, "sketch": sketch_problem, "store_text": store_text_problem,
    "short_texts": short_texts_problem, "key_root": key_root_problem,
}


def meta_problems(meta: dict[str, str]) -> list[tuple[str, str]]:
    """(key, what is wrong) for each recorded setting that is not valid; [] when all are."""
    problems = []
    for key, check in CHECKS.items():
        if key in meta:
            problem = check(meta[key])
            if problem is not None:
                problems.append((key, problem))
    problems.extend((key, "must be text") for key in TEXT_KEYS if key in meta and not isinstance(meta[key], str))
    return problems


def validate_meta(meta: dict[str, str], path: str | os.PathLike) -> None:
    """Raise InvalidMetadata for the first recorded setting that is not valid."""
    problems = meta_problems(meta)
    if problems:
        raise InvalidMetadata(os.fspath(path), *problems[0])


def clusters_record_problem(value: str) -> str | None:
    """What is wrong with a recorded clustering run (simhash_meta 'clusters'), or None."""
    try:
        info = json.loads(value)
    except (ValueError, RecursionError):
        return "not JSON"
    if not isinstance(info, dict):
        return "not a JSON object"

    def whole(x) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    checks = (
        ("k", lambda x: whole(x) and 0 <= x <= 64, "a whole number from 0 to 64"),
        ("representative", lambda x: x in REPRESENTATIVE_RULES, f"one of {', '.join(REPRESENTATIVE_RULES)}"),
        ("documents", lambda x: whole(x) and x >= 0, "a whole number, not negative"),
        ("at", lambda x: isinstance(x, str), "a time"),
    )
    for name, valid, what in checks:
        if name not in info:
            return f"{name} is missing"
        if not valid(info[name]):
            return f"{name} must be {what}, not {info[name]!r:.40}"
    threshold = info.get("jaccard")
    if threshold is not None and not (isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
                                      and 0 < threshold <= 1):
        return f"jaccard must be null or a number above 0 and at most 1, not {threshold!r:.40}"
    if not isinstance(info.get("stale", False), bool):
        return f"stale must be true or false, not {info['stale']!r:.40}"
    return None
