"""JSONL lines to records, a chunk of whole lines at a time: parse, validate, content-hash and fingerprint.

read_chunk() is a pure function of (bytes, rules), so the pool's workers (parallel.map_in_order) give
exactly what the reading process gives; sources.Reader cuts the input into chunks, hands them out and
does what depends on the order of the whole input (a repeated id, the line numbers in messages).
What comes back is small: keys, fingerprints, sketches, content hashes and lengths, the texts only when
asked for (an index that stores them), never the lines (the reader has them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.fingerprint import simhash_and_sketch_many, simhash_many
from ..core.pieces import PIECE_CHARS, simhash_and_sketch_pieces
from ..core.settings import FingerprintSettings
from ..core.short_texts import short_text_data
from ..core.sketch import DEFAULT_SCHEME, SketchScheme
from ..errors import InvalidInput
from ..store.texts import content_hash


@dataclass(frozen=True)
class RecordRules:
    """How a JSONL line becomes a record, and what to compute of it."""

    text_field: str = "text"
    id_field: str = "id"
    encoding: str = "utf-8"
    errors: str = "strict"
    require_id: bool = False
    max_record_bytes: int = 128 << 20  # a longer line is skipped (sources.MAX_RECORD_BYTES)
    settings: FingerprintSettings | None = None  # None: no fingerprints, the texts are returned
    sketches: bool = True  # with the fingerprints, each text's sketch
    content_hashes: bool = True
    keep_texts: bool = False  # return the texts too (an index that stores them)
    stream_over: int | None = None  # a longer text (characters) is fingerprinted in pieces, its text not kept
    scheme: SketchScheme = DEFAULT_SCHEME  # of the sketches: the index's (an older index keeps version 1)
    short_texts: bool = False  # with the sketches, a short text's exact data (core/short_texts.py)


@dataclass
class ChunkRecords:
    """The records of a chunk's lines, in order. Lines are numbered from 0 within the chunk."""

    skips: list[tuple[int, str, bool]] = field(default_factory=list)  # (line, reason, had no id field)
    lines: list[int] = field(default_factory=list)  # each record's line
    starts: list[int] = field(default_factory=list)  # where each record's line begins in the chunk
    ends: list[int] = field(default_factory=list)  # and ends (after its newline)
    keys: list[str | None] = field(default_factory=list)  # None: no id field (keyed by path:line)
    lengths: list[int] = field(default_factory=list)  # characters
    hashes: list[bytes] = field(default_factory=list)  # content hashes (empty without rules.content_hashes)
    fingerprints: list[int | None] = field(default_factory=list)  # (empty without rules.settings)
    sketches: list[bytes | None] = field(default_factory=list)  # (empty without rules.sketches)
    short_texts: list[bytes | None] = field(default_factory=list)  # (empty without rules.short_texts)
    # with rules.keep_texts (None for a text fingerprinted in pieces); without rules.settings, every text
    texts: Sequence[str | None] | None = None
    failures: dict[int, str] = field(default_factory=dict)  # record -> why its text could not be fingerprinted


def parse_record(raw: bytes, rules: RecordRules) -> tuple[bool, str | None, str | None, str | None]:
    """(no id field, key, text, reason): one JSONL line checked as sources.Reader always has. A reason
    means the line is skipped; key None (with text) means it has no id field and is keyed by its place.
    'no id field' is True also for some skipped lines: they count as keyed by place, as before."""
    try:
        record = json.loads(raw.decode(rules.encoding, rules.errors))
    except UnicodeDecodeError:
        return False, None, None, f"not {rules.encoding}; try --encoding or --errors replace"
    except json.JSONDecodeError as exc:
        return False, None, None, f"not JSON ({exc.msg})"
    except RecursionError:
        return False, None, None, "JSON nested too deeply"
    if not isinstance(record, dict):
        return False, None, None, "not a JSON object"
    body = record.get(rules.text_field)
    if not isinstance(body, str):
        what = "no text field" if body is None else "the text field"
        return False, None, None, (
            f"{what} {rules.text_field!r}{'' if body is None else ' is not a string'} (its fields: {_fields(record)})"
        )
    key = record.get(rules.id_field)
    idless = key is None
    if idless:
        if rules.require_id:
            return False, None, None, f"no id field {rules.id_field!r} (--require-id)"
    else:
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            return False, None, None, f"id field {rules.id_field!r} is not a string or an integer"
        key = str(key)
        if "\x00" in key:
            return False, None, None, "the id contains a NUL character"
    if (key is not None and has_lone_surrogate(key)) or has_lone_surrogate(body):
        return idless, None, None, "the JSON holds an unpaired surrogate escape (\\ud800-\\udfff)"
    return idless, key, body, None


def _fields(record: dict) -> str:
    """The field names of a record, for a message: sorted, shortened, at most 10."""
    if not record:
        return "none"
    names = sorted(str(name)[:40] for name in record)
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return shown.encode("ascii", "backslashreplace").decode("ascii") if not shown.isprintable() else shown


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def read_chunk(data: bytes, rules: RecordRules) -> ChunkRecords:
    """The records of whole JSONL lines (the last may lack its newline): skipped lines with their
    reasons, and for the rest what rules ask for. Blank lines are neither."""
    out = ChunkRecords()
    texts: list[str] = []
    position = line = 0
    while position < len(data):
        end = data.find(b"\n", position)
        end = len(data) if end < 0 else end + 1
        raw = data[position:end]
        if len(raw) - raw.endswith(b"\n") > rules.max_record_bytes:
            out.skips.append((line, f"line longer than {rules.max_record_bytes >> 20} MiB", False))
        elif raw.strip():
            idless, key, text, reason = parse_record(raw, rules)
            if reason is not None:
                out.skips.append((line, reason, idless))
            else:
                assert text is not None  # parse_record gives a text or a reason
                out.lines.append(line)
                out.starts.append(position)
                out.ends.append(end)
                out.keys.append(key)
                texts.append(text)
        position, line = end, line + 1
    out.lengths = [len(text) for text in texts]
    if rules.content_hashes:
        out.hashes = [content_hash(text) for text in texts]
    if rules.settings is None:
        out.texts = texts
        return out
    streamed = set() if rules.stream_over is None else {i for i, n in enumerate(out.lengths) if n > rules.stream_over}
    whole = [text for i, text in enumerate(texts) if i not in streamed]
    if rules.sketches:
        fingerprints, sketches = simhash_and_sketch_many(whole, rules.settings, rules.scheme)
    else:
        fingerprints, sketches = simhash_many(whole, rules.settings), []
    if streamed:  # rare: merge the texts fingerprinted in pieces back in their places
        merged_fps, merged_sketches, computed = [], [], iter(zip(fingerprints, sketches or [None] * len(whole)))
        for i, text in enumerate(texts):
            if i in streamed:
                fp, sk = _in_pieces(text, rules.settings, rules.scheme, out.failures, i)
            else:
                fp, sk = next(computed)
            merged_fps.append(fp)
            merged_sketches.append(sk)
        fingerprints, sketches = merged_fps, merged_sketches if rules.sketches else []
    out.fingerprints, out.sketches = fingerprints, sketches
    if rules.short_texts:
        out.short_texts = [
            None if i in streamed or fp is None else short_text_data(text)
            for i, (text, fp) in enumerate(zip(texts, fingerprints))
        ]
    if rules.keep_texts:
        out.texts = [None if i in streamed else text for i, text in enumerate(texts)]
    return out


def _in_pieces(
    text: str, settings: FingerprintSettings, scheme: SketchScheme, failures: dict[int, str], i: int
) -> tuple[int | None, bytes | None]:
    """A long text fingerprinted in pieces, so that no feature array of the whole is made."""
    parts = (text[j : j + PIECE_CHARS] for j in range(0, len(text), PIECE_CHARS))
    try:
        return simhash_and_sketch_pieces(parts, settings, scheme=scheme)
    except InvalidInput as exc:
        failures[i] = str(exc)
        return None, None
