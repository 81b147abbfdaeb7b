"""JSONL lines to records, a chunk of whole lines at a time: parse, validate, content-hash and fingerprint.

read_chunk() is a pure function of (bytes, rules), so the pool's workers (pool.map_in_order) give
exactly what the reading process gives; sources.Reader cuts the input into chunks, hands them out and
does what depends on the order of the whole input (a repeated id, the line numbers in messages).
What comes back is small: keys, fingerprints, sketches, content hashes and lengths, the texts only when
asked for (an index that stores them), never the lines (the reader has them).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..core.fingerprint import LONG_TEXT, simhash_and_sketch_many, simhash_many
from ..core.pieces import PIECE_CHARS, simhash_and_sketch_pieces
from ..core.settings import FingerprintSettings
from ..core.short_texts import (
    SHORT_TEXT_BYTES,
    SHORT_TEXT_DEFLATED_MOST,
    SHORT_TEXT_MOST,
    short_text_data,
)
from ..core.sketch import DEFAULT_SCHEME, SketchScheme
from ..errors import InvalidInput
from ..native import documents as native_documents
from ..store.texts import SourceFile, content_hash_of_utf8


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
    columns: bool = False  # a chunk the C path reads whole comes as RecordColumns (ChunkRecords.columns: dedup's)


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
    # With rules.columns, where the C path read every line: the records as arrays, and then only lines, keys and
    # columns are filled (no skips or failures: those come from lines the Python path reads)
    columns: RecordColumns | None = None


@dataclass(frozen=True)
class RecordColumns:
    """The records of a chunk the C path read whole, as arrays (one row a record, in line order): what dedup reads
    without an object per record (sources.LineBatch)."""

    starts: np.ndarray  # int64: where each record's line begins in the chunk
    ends: np.ndarray  # and ends (after its newline)
    lengths: np.ndarray  # int64, characters
    fingerprints: np.ndarray  # uint64, 0 where has_fingerprint is False
    has_fingerprint: np.ndarray  # bool
    sketches: np.ndarray | None  # (records, bytes) uint8, zeros where has_sketch is False; None without sketches
    has_sketch: np.ndarray  # bool


@dataclass(frozen=True)
class LineChunk:
    """Whole JSONL lines, and where they are in the input (sources.Reader cuts them)."""

    data: bytes
    first_line: int  # the number of its first line
    size: int  # bytes of input it stands for (with the overlong lines before it)
    overlong: tuple[int, ...] = ()  # lines just before it, skipped as too long
    path: str = ""  # the input's name in messages and path:line keys
    error: str | None = None  # the input could not be opened: why
    offset: int = 0  # where data begins in the input
    source: SourceFile | None = None  # the file its lines can be read from again (None: stdin, not for an index)


def parse_record(raw: bytes, rules: RecordRules) -> tuple[bool, str | None, str | None, str | None]:
    """(no id field, key, text, reason): one JSONL line checked as sources.Reader always has. A reason
    means the line is skipped; key None (with text) means it has no id field and is keyed by its place.
    'no id field' is True also for some skipped lines: they count as keyed by place, as before."""
    idless, key, text, _, reason = _parsed(raw, rules)
    return idless, key, text, reason


# What json.loads runs under its wrappers (the scanner JSONDecoder.__init__ makes; typeshed does not list it).
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_object(line: str):
    """json.loads(line), the common case without its wrappers: a line that begins with an object and ends
    with it, but for JSON whitespace. Anything else (and every error) goes through json.loads, so that
    results and messages are json.loads's own."""
    if line.startswith("{"):
        try:
            value, end = _SCAN(line, 0)
        except (StopIteration, ValueError, RecursionError):
            return json.loads(line)
        if end == len(line) or not line[end:].strip(" \t\n\r"):
            return value
    return json.loads(line)


def _parsed(
    raw: bytes | memoryview, rules: RecordRules
) -> tuple[bool, str | None, str | None, bytes | None, str | None]:
    """parse_record(), with the text's UTF-8 (made by the check for unpaired surrogates, which only a text
    with one fails: every later use of the text's bytes reuses it)."""
    try:
        record = _json_object(str(raw, rules.encoding, rules.errors))
    except UnicodeDecodeError:
        return False, None, None, None, f"not {rules.encoding}; try --encoding or --errors replace"
    except json.JSONDecodeError as exc:
        return False, None, None, None, f"not JSON ({exc.msg})"
    except ValueError:  # int()'s limit on digits (sys.get_int_max_str_digits), met by json's scanner
        return False, None, None, None, "not JSON here (an integer of more digits than Python reads)"
    except RecursionError:
        return False, None, None, None, "JSON nested too deeply"
    if type(record) is not dict:
        return False, None, None, None, "not a JSON object"
    body = record.get(rules.text_field)
    if type(body) is not str:
        what = "no text field" if body is None else "the text field"
        return False, None, None, None, (
            f"{what} {rules.text_field!r}{'' if body is None else ' is not a string'} (its fields: {_fields(record)})"
        )
    key = record.get(rules.id_field)
    idless = key is None
    if idless:
        if rules.require_id:
            return False, None, None, None, f"no id field {rules.id_field!r} (--require-id)"
    else:
        if type(key) is not str:
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                return False, None, None, None, f"id field {rules.id_field!r} is not a string or an integer"
            key = str(key)
        if "\x00" in key:
            return False, None, None, None, "the id contains a NUL character"
    utf8 = utf8_of(body)
    if utf8 is None or (key is not None and not key.isascii() and has_lone_surrogate(key)):
        return idless, None, None, None, "the JSON holds an unpaired surrogate escape (\\ud800-\\udfff)"
    return idless, key, body, utf8, None


def _fields(record: dict) -> str:
    """The field names of a record, for a message: sorted, shortened, at most 10."""
    if not record:
        return "none"
    names = sorted(str(name)[:40] for name in record)
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return shown.encode("ascii", "backslashreplace").decode("ascii") if not shown.isprintable() else shown


def has_lone_surrogate(text: str) -> bool:
    return utf8_of(text) is None


def utf8_of(text: str) -> bytes | None:
    """The text's UTF-8, or None where it holds an unpaired surrogate (the one thing strict UTF-8 cannot
    encode). Where it is not None it is what "surrogatepass" writes: the bytes of the content hash and of
    the C core's buffer."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def read_chunk(data: bytes, rules: RecordRules) -> ChunkRecords:
    """The records of whole JSONL lines (the last may lack its newline): skipped lines with their
    reasons, and for the rest what rules ask for. Blank lines are neither.

    Where the C core's document path is built and the rules are ones it computes, one C call reads the chunk
    (native/documents.c, the GIL released) and the lines it is not sure of are read here the Python way
    (python_chunk): the same records either way, bit for bit."""
    plan = _native_plan(rules)
    if plan is not None:
        lib = native_documents.library()
        rows = native_documents.read_rows(lib, data, plan) if lib is not None else None
        if rows is not None:
            return _from_rows(data, rows, rules)
    return python_chunk(data, rules)


def native_path(rules: RecordRules) -> bool:
    """Whether read_chunk() reads chunks under these rules in C (the GIL released for nearly all of it: threads
    read chunks in parallel at no start-up cost, where processes would each import numpy and pickle rows)."""
    return _native_plan(rules) is not None and native_documents.library() is not None


@lru_cache(maxsize=64)
def _native_plan(rules: RecordRules) -> native_documents.Plan | None:
    """The C path's plan for these rules, or None where they ask for what only the Python path does (no
    fingerprints, texts kept, another encoding, words, a short text deflated by another zlib)."""
    settings = rules.settings
    if settings is None or rules.keep_texts or rules.text_field == rules.id_field:
        return None
    try:
        if codecs.lookup(rules.encoding).name != "utf-8":
            return None
    except LookupError:
        return None
    lib = native_documents.library()
    scheme = rules.scheme if rules.sketches else None
    if lib is None or not native_documents.plan_supported(lib, settings, scheme):
        return None
    if rules.short_texts and not native_documents.same_zlib(lib):
        return None
    whole_most = LONG_TEXT if rules.stream_over is None else min(rules.stream_over, LONG_TEXT)
    return native_documents.Plan(
        rules.text_field.encode("utf-8", "surrogatepass"), rules.id_field.encode("utf-8", "surrogatepass"),
        rules.max_record_bytes, whole_most, rules.require_id, settings.ngram, settings.weights, rules.content_hashes,
        rules.short_texts, SHORT_TEXT_BYTES, SHORT_TEXT_MOST, SHORT_TEXT_DEFLATED_MOST, scheme,
    )  # fmt: skip


def _from_rows(data: bytes, rows: native_documents.Rows, rules: RecordRules) -> ChunkRecords:
    """ChunkRecords of the C path's rows, the lines it left read by python_chunk and merged in line order."""
    kind = rows.kind[: rows.lines]
    at = np.flatnonzero(kind == native_documents.LINE_RECORD)
    out = ChunkRecords()
    out.lines = at.tolist()
    keys = rows.keys.decode("utf-8").split("\x00")[:-1]  # every record's key ended by a NUL: one split
    has_id = rows.has_id[at]
    out.keys = list[str | None](keys) if has_id.all() else [
        key if there else None for key, there in zip(keys, has_id.tolist())
    ]
    if rules.columns and not rules.content_hashes and not rules.short_texts and not (
            kind == native_documents.LINE_PYTHON).any():
        status = rows.status[at]
        has_sketch = (status & native_documents.HAS_SKETCH) != 0
        out.columns = RecordColumns(
            rows.start[at], rows.end[at], rows.lengths[at], rows.fingerprints[at],
            (status & native_documents.HAS_FINGERPRINT) != 0,
            rows.sketches[at] if rules.sketches and rows.sketches is not None else None,
            has_sketch if rules.sketches and rows.sketches is not None else np.zeros(len(at), dtype=bool),
        )  # fmt: skip
        return out
    out.starts = rows.start[at].tolist()
    out.ends = rows.end[at].tolist()
    shorts = rows.shorts
    out.lengths = rows.lengths[at].tolist()
    if rules.content_hashes:
        flat = rows.hashes[at].tobytes()
        out.hashes = [flat[i : i + 16] for i in range(0, len(flat), 16)]
    status = rows.status[at]
    out.fingerprints = [
        fp if s & native_documents.HAS_FINGERPRINT else None
        for fp, s in zip(rows.fingerprints[at].tolist(), status.tolist())
    ]
    if rules.sketches and rows.sketches is not None:
        width = rows.sketches.shape[1]
        flat = rows.sketches[at].tobytes()
        out.sketches = [
            flat[i * width : (i + 1) * width] if s & native_documents.HAS_SKETCH else None
            for i, s in enumerate(status.tolist())
        ]
    if rules.short_texts:
        out.short_texts = [
            shorts[a:b] if b > a else None for a, b in zip(rows.short_start[at].tolist(), rows.short_end[at].tolist())
        ]
    left = np.flatnonzero(kind == native_documents.LINE_PYTHON)
    if len(left):
        _merge_python_lines(out, data, rows, left.tolist(), rules)
    return out


def _merge_python_lines(
    out: ChunkRecords, data: bytes, rows: native_documents.Rows, left: list[int], rules: RecordRules
) -> None:
    """The lines the C path left, read by python_chunk as a chunk of their own, merged into out in line order."""
    starts, ends = rows.start[left].tolist(), rows.end[left].tolist()
    apart = python_chunk(b"".join(data[a:b] for a, b in zip(starts, ends)), rules)
    out.skips = [(left[line], reason, idless) for line, reason, idless in apart.skips]
    if not apart.lines:
        return
    lines = out.lines + [left[line] for line in apart.lines]
    order = sorted(range(len(lines)), key=lines.__getitem__)
    native_count = len(out.lines)
    out.lines = [lines[i] for i in order]
    out.starts = [(out.starts[i] if i < native_count else starts[apart.lines[i - native_count]]) for i in order]
    out.ends = [(out.ends[i] if i < native_count else ends[apart.lines[i - native_count]]) for i in order]
    for name in ("keys", "lengths", "hashes", "fingerprints", "sketches", "short_texts"):
        mine, theirs = getattr(out, name), getattr(apart, name)
        if mine or theirs:
            both = mine + theirs
            setattr(out, name, [both[i] for i in order])
    if apart.failures:
        where = {old: new for new, old in enumerate(order)}
        out.failures = {where[native_count + i]: why for i, why in apart.failures.items()}


def python_chunk(data: bytes, rules: RecordRules) -> ChunkRecords:
    """read_chunk() in Python, line by line: the reference, and the path of every line the C path leaves.

    Each text is encoded to UTF-8 once (by the check for unpaired surrogates, _parsed), and those bytes
    are its content hash's and the C core's: they were encoded again for each before (a tenth of the CPU)."""
    out = ChunkRecords()
    texts: list[str] = []
    utf8s: list[bytes] = []
    view = memoryview(data)
    size, most = len(data), rules.max_record_bytes
    position = line = 0
    while position < size:
        end = data.find(b"\n", position)
        end = size if end < 0 else end + 1
        if end - position - (data[end - 1] == 10) > most:
            out.skips.append((line, f"line longer than {most >> 20} MiB", False))
        elif data[position] == 123 or data[position:end].strip():  # "{": not blank, without a copy to see
            idless, key, text, utf8, reason = _parsed(view[position:end], rules)
            if reason is not None:
                out.skips.append((line, reason, idless))
            else:
                assert text is not None and utf8 is not None  # _parsed gives a text or a reason
                out.lines.append(line)
                out.starts.append(position)
                out.ends.append(end)
                out.keys.append(key)
                texts.append(text)
                utf8s.append(utf8)
        position, line = end, line + 1
    view.release()
    out.lengths = [len(text) for text in texts]
    if rules.content_hashes:
        out.hashes = [content_hash_of_utf8(utf8) for utf8 in utf8s]  # of the bytes at hand
    if rules.settings is None:
        out.texts = texts
        return out
    streamed: set[int] = set()
    if rules.stream_over is not None:
        streamed = {i for i, n in enumerate(out.lengths) if n > rules.stream_over}
    whole, whole_utf8 = texts, utf8s
    if streamed:
        whole = [text for i, text in enumerate(texts) if i not in streamed]
        whole_utf8 = [utf8 for i, utf8 in enumerate(utf8s) if i not in streamed]
    del utf8s
    if rules.sketches:
        fingerprints, sketches = simhash_and_sketch_many(whole, rules.settings, rules.scheme, utf8=whole_utf8)
    else:
        fingerprints, sketches = simhash_many(whole, rules.settings, utf8=whole_utf8), []
    del whole_utf8
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
        # short_text_data() tries only texts of at most SHORT_TEXT_MOST characters: the rest are None here
        # without a call (four fifths of a crawl's pages).
        out.short_texts = [
            None if fp is None or len(text) > SHORT_TEXT_MOST or i in streamed else short_text_data(text)
            for i, (text, fp) in enumerate(zip(texts, fingerprints))
        ]
    if rules.keep_texts:
        out.texts = [None if i in streamed else text for i, text in enumerate(texts)] if streamed else texts
    return out


def read_line_chunk(task: tuple[LineChunk, RecordRules]) -> ChunkRecords:
    """read_chunk() of a (chunk, rules) task: what the pool's workers run. Here, not in sources.py, so that
    a worker imports this module and the core, not the index and the store."""
    return read_chunk(task[0].data, task[1])


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
