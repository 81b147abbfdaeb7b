"""The per-document path of add in C (documents.c), through ctypes: a chunk of JSONL lines to rows in one call.

One call per chunk does what pipeline/jsonl.py does per line in Python (parse, unescape, UTF-8 check, content
hash, fingerprint, sketch, short text data, length), and releases the GIL while it runs: threads read chunks
in parallel. A line the C scanner is not sure of comes back marked SHC_LINE_PYTHON, and the caller reads it
the Python way (never a different answer: pipeline/jsonl.py's tests compare the two on hostile input).
"""

from __future__ import annotations

import ctypes
import threading
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from . import core, scheme_struct, supports

if TYPE_CHECKING:  # (a search that makes no sets imports no executor)
    from collections.abc import Iterator
    from concurrent.futures import Executor

LINE_BLANK, LINE_RECORD, LINE_PYTHON = 0, 1, 2
HAS_FINGERPRINT, HAS_SKETCH = 0x01, 0x02


class _Rules(ctypes.Structure):
    _fields_ = [
        ("text_field", ctypes.c_char_p), ("text_field_len", ctypes.c_int64),
        ("id_field", ctypes.c_char_p), ("id_field_len", ctypes.c_int64),
        ("max_record_bytes", ctypes.c_int64), ("whole_most", ctypes.c_int64),
        ("require_id", ctypes.c_int32), ("ngram", ctypes.c_int32), ("weights", ctypes.c_int32),
        ("content_hashes", ctypes.c_int32), ("short_texts", ctypes.c_int32), ("short_limit", ctypes.c_int32),
        ("short_most", ctypes.c_int32), ("deflated_most", ctypes.c_int32), ("scheme", ctypes.c_void_p),
    ]  # fmt: skip


class _Out(ctypes.Structure):
    _fields_ = [
        ("capacity", ctypes.c_size_t), ("kind", ctypes.c_void_p), ("start", ctypes.c_void_p),
        ("end", ctypes.c_void_p), ("has_id", ctypes.c_void_p), ("key_start", ctypes.c_void_p),
        ("key_end", ctypes.c_void_p), ("keys", ctypes.c_void_p), ("keys_capacity", ctypes.c_size_t),
        ("lengths", ctypes.c_void_p), ("hashes", ctypes.c_void_p), ("fingerprints", ctypes.c_void_p),
        ("status", ctypes.c_void_p), ("sketches", ctypes.c_void_p), ("short_start", ctypes.c_void_p),
        ("short_end", ctypes.c_void_p), ("shorts", ctypes.c_void_p), ("shorts_capacity", ctypes.c_size_t),
    ]  # fmt: skip


@lru_cache(maxsize=None)
def _functions(lib: ctypes.CDLL) -> bool:
    """Declare the document path's functions; False where this library lacks them (an older build)."""
    try:
        p = ctypes.c_void_p
        lib.shc_docs_new.restype = p
        lib.shc_docs_free.argtypes = [p]
        lib.shc_docs_zlib_version.restype = ctypes.c_char_p
        lib.shc_docs_chunk.restype = ctypes.c_int
        lib.shc_docs_chunk.argtypes = [p, ctypes.c_char_p, ctypes.c_size_t, p, p, p]
        lib.shc_docs_lines.restype = ctypes.c_size_t
        lib.shc_docs_lines.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.shc_blake2b_128.argtypes = [ctypes.c_char_p, ctypes.c_size_t, p]
        lib.shc_is_space.restype = ctypes.c_int
        lib.shc_is_space.argtypes = [ctypes.c_uint32]
    except AttributeError:
        return False
    return True


SET_TEXT, SET_LINE = 0, 1  # what shingle_sets reads: a text's UTF-8, or a JSONL line's text field
SET_PYTHON, SET_MADE, SET_LONG = 0, 1, 2  # what it made of each: nothing (Python's to read), a set, out of reach
SET_CHANGED = 3  # (with digests) not the text the digest was made of: no set


@lru_cache(maxsize=None)
def _sets_functions(lib: ctypes.CDLL) -> bool:
    """Declare the exact check's shingle sets (shc_docs_shingle_sets); False where this library lacks them."""
    try:
        p = ctypes.c_void_p
        lib.shc_docs_shingle_sets.restype = ctypes.c_int
        lib.shc_docs_shingle_sets.argtypes = [p, ctypes.c_char_p, ctypes.c_size_t, p, p, ctypes.c_size_t, p,
                                              ctypes.c_int32, p, p]
        lib.shc_docs_sets.restype = ctypes.POINTER(ctypes.c_uint64)
        lib.shc_docs_sets.argtypes = [p]
        lib.shc_docs_checked_sets.restype = ctypes.c_int
        lib.shc_docs_checked_sets.argtypes = [p, ctypes.c_char_p, ctypes.c_size_t, p, p, ctypes.c_size_t, p,
                                              ctypes.c_int32, ctypes.c_char_p, p, p]
    except AttributeError:
        return False
    return True


def library() -> ctypes.CDLL | None:
    """The core with its document path, where the switch lets the core run (native.core()) and it is built."""
    lib = core()
    return lib if lib is not None and _functions(lib) else None


def same_zlib(lib: ctypes.CDLL) -> bool:
    """Whether the core deflates short texts with the zlib Python's zlib module runs (the same bytes)."""
    return lib.shc_docs_zlib_version().decode() == zlib.ZLIB_RUNTIME_VERSION


class _State:
    """One thread's shc_docs, freed with the thread's local attributes."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.pointer = lib.shc_docs_new()
        if not self.pointer:
            raise MemoryError("the C core could not allocate its document state")

    def __del__(self) -> None:
        if getattr(self, "pointer", None):
            self.lib.shc_docs_free(self.pointer)
            self.pointer = None


_local = threading.local()


def _state(lib: ctypes.CDLL) -> _State:
    state = getattr(_local, "docs", None)
    if state is None or state.lib is not lib:
        state = _local.docs = _State(lib)
    return state


@dataclass(frozen=True)
class Rows:
    """What shc_docs_chunk wrote for `lines` lines (the arrays are as long as the chunk could hold)."""

    lines: int
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    has_id: np.ndarray
    key_start: np.ndarray
    key_end: np.ndarray
    keys: bytes  # every record's key followed by a NUL (an empty key where it has none)
    lengths: np.ndarray
    hashes: np.ndarray  # (capacity, 16) uint8
    fingerprints: np.ndarray
    status: np.ndarray
    sketches: np.ndarray | None  # (capacity, bytes) uint8
    short_start: np.ndarray
    short_end: np.ndarray
    shorts: bytes


@dataclass(frozen=True)
class Plan:
    """Everything of RecordRules the C path needs, as C values (made once per rules: rules_for)."""

    text_field: bytes
    id_field: bytes
    max_record_bytes: int
    whole_most: int
    require_id: bool
    ngram: int
    weights: str  # FingerprintSettings.weights
    content_hashes: bool
    short_texts: bool
    short_limit: int
    short_most: int
    deflated_most: int
    scheme: object | None  # sketch.SketchScheme or None


def plan_supported(lib: ctypes.CDLL, settings, scheme) -> bool:
    """Whether the core computes these settings' fingerprints and this scheme's sketches (None: no sketches)."""
    if not supports(settings):
        return False
    return scheme is None or lib.shc_sketch_bytes(ctypes.byref(scheme_struct(scheme))) > 0


def read_rows(lib: ctypes.CDLL, data: bytes, plan: Plan) -> Rows | None:
    """The rows of a chunk of whole lines; None where the C path refused it (out of memory: read it in Python)."""
    from . import WEIGHTS

    size = len(data)
    capacity = lib.shc_docs_lines(data, size) or 1  # (the GIL released, as bytes.count does not)
    c_scheme = scheme_struct(plan.scheme) if plan.scheme is not None else None
    nbytes = lib.shc_sketch_bytes(ctypes.byref(c_scheme)) if c_scheme is not None else 0
    kind = np.empty(capacity, dtype=np.uint8)
    start = np.empty(capacity, dtype=np.int64)
    end = np.empty(capacity, dtype=np.int64)
    has_id = np.empty(capacity, dtype=np.uint8)
    key_start = np.empty(capacity, dtype=np.int64)
    key_end = np.empty(capacity, dtype=np.int64)
    # Buffers numpy leaves unwritten (create_string_buffer zeroes them, holding the GIL: 3 ms a chunk).
    keys_capacity = size + capacity
    keys = np.empty(keys_capacity, dtype=np.uint8)
    lengths = np.empty(capacity, dtype=np.int64)
    hashes = np.empty((capacity, 16), dtype=np.uint8)
    fingerprints = np.empty(capacity, dtype=np.uint64)
    status = np.empty(capacity, dtype=np.uint8)
    sketches = np.empty((capacity, nbytes), dtype=np.uint8) if nbytes else None
    short_start = np.empty(capacity, dtype=np.int64)
    short_end = np.empty(capacity, dtype=np.int64)
    shorts_capacity = size + 16 * capacity + 1
    shorts = np.empty(shorts_capacity if plan.short_texts else 1, dtype=np.uint8)
    rules = _Rules(
        plan.text_field, len(plan.text_field), plan.id_field, len(plan.id_field), plan.max_record_bytes,
        plan.whole_most, int(plan.require_id), plan.ngram, WEIGHTS[plan.weights], int(plan.content_hashes),
        int(plan.short_texts), plan.short_limit, plan.short_most, plan.deflated_most,
        ctypes.addressof(c_scheme) if c_scheme is not None else None,
    )  # fmt: skip
    out = _Out(
        capacity, kind.ctypes.data, start.ctypes.data, end.ctypes.data, has_id.ctypes.data, key_start.ctypes.data,
        key_end.ctypes.data, keys.ctypes.data, keys_capacity, lengths.ctypes.data, hashes.ctypes.data,
        fingerprints.ctypes.data, status.ctypes.data, sketches.ctypes.data if sketches is not None else None,
        short_start.ctypes.data, short_end.ctypes.data, shorts.ctypes.data,
        shorts_capacity if plan.short_texts else 1,
    )  # fmt: skip
    lines = ctypes.c_size_t(0)
    code = lib.shc_docs_chunk(
        _state(lib).pointer, data, size, ctypes.byref(rules), ctypes.byref(out), ctypes.byref(lines)
    )
    if code:
        return None
    records = np.flatnonzero(kind[: lines.value] == LINE_RECORD)
    used = int(key_end[records].max(initial=-1)) + 1  # (each key is followed by a NUL)
    shorts_used = int(short_end[records].max(initial=0)) if plan.short_texts else 0
    return Rows(
        lines.value, kind, start, end, has_id, key_start, key_end, keys[:used].tobytes(), lengths, hashes,
        fingerprints, status, sketches, short_start, short_end, shorts[:shorts_used].tobytes(),
    )  # fmt: skip


@dataclass(frozen=True)
class LineFields:
    """How shingle_sets finds a JSONL line's text: its field names (UTF-8) and the limits of the reader's rules."""

    text_field: bytes
    id_field: bytes
    max_record_bytes: int
    whole_most: int  # characters: a longer text is out of reach (SET_LONG)


def shingle_sets(
    lib: ctypes.CDLL, data: list[bytes], kinds: list[int], fields: LineFields, ngram: int,
    digests: list[bytes] | None = None,
) -> tuple[list[int], list[np.ndarray | None]] | None:
    """The exact check's shingle sets (core/shingles.shingle_set) of texts (kind SET_TEXT: data is the text's
    UTF-8) and JSONL lines (SET_LINE: the record's text field), in one C call with the GIL released: (the status
    of each, SET_*; its set where SET_MADE, else None). digests: each text's stored content hash
    (store/texts.content_hash), a text of another being SET_CHANGED. None where the library lacks the call or
    it failed (memory): the caller reads them the Python way."""
    if not data or not _sets_functions(lib):
        return None
    if digests is not None and (len(digests) != len(data) or any(len(d) != 16 for d in digests)):
        raise ValueError("shingle_sets takes one 16-byte digest a text")
    n = len(data)
    lengths = np.fromiter(map(len, data), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    joined = b"".join(data)
    kind = np.array(kinds, dtype=np.uint8)
    ends = np.empty(n, dtype=np.int64)
    status = np.empty(n, dtype=np.uint8)
    rules = _Rules(
        fields.text_field, len(fields.text_field), fields.id_field, len(fields.id_field), fields.max_record_bytes,
        fields.whole_most, 0, 0, 0, 0, 0, 0, 0, 0, None,
    )  # fmt: skip
    state = _state(lib)
    if digests is None:
        code = lib.shc_docs_shingle_sets(state.pointer, joined, len(joined), offsets.ctypes.data, kind.ctypes.data,
                                         n, ctypes.byref(rules), ngram, ends.ctypes.data, status.ctypes.data)
    else:
        code = lib.shc_docs_checked_sets(state.pointer, joined, len(joined), offsets.ctypes.data, kind.ctypes.data,
                                         n, ctypes.byref(rules), ngram, b"".join(digests), ends.ctypes.data,
                                         status.ctypes.data)  # fmt: skip
    if code:
        return None
    total = int(ends[-1])
    flat = np.ctypeslib.as_array(lib.shc_docs_sets(state.pointer), shape=(total,)) if total else np.empty(0, np.uint64)
    made = status.tolist()
    starts = [0, *ends[:-1].tolist()]
    # (each set copied out on its own: a view would hold the whole call's sets, and the state's memory is reused)
    sets = [flat[a:b].copy() if s == SET_MADE else None for a, b, s in zip(starts, ends.tolist(), made)]
    return made, sets


# The texts whose shingle sets one call makes, in bytes: the sets of a call are all held at once (8 bytes a
# distinct shingle, about one a character), and the state's buffer for them stays as large as the largest.
SETS_CALL_BYTES = 1 << 20
# No call of a split is smaller than this (bytes of texts, some 0.3 ms of work): handing a call to another
# thread costs tens of microseconds.
SETS_SPLIT_BYTES = 1 << 15


def sets_in_calls(
    lib: ctypes.CDLL, data: list[bytes], kinds: list[int], fields: LineFields, ngram: int,
    digests: list[bytes] | None = None, aside: Executor | None = None, call_bytes: int = SETS_CALL_BYTES,
) -> Iterator[tuple[int, int, tuple[list[int], list[np.ndarray | None]] | None]]:
    """shingle_sets of many texts, in calls of at most call_bytes of them (a longer text alone): (lo, hi, what
    shingle_sets gave for data[lo:hi]), in order. With `aside` (an executor whose thread stays: each thread
    keeps its own C state, and a new one per call would make its buffers anew), every other call runs there
    while this thread makes the one before: the call releases the GIL, so two cores make sets at once. The
    texts are then cut into calls of at most half of them, so that even one call's worth is shared."""
    total = sum(map(len, data))
    if aside is not None and total < 2 * SETS_SPLIT_BYTES:
        aside = None
    most = call_bytes if aside is None else min(call_bytes, max(SETS_SPLIT_BYTES, total // 2 + 1))
    spans: list[tuple[int, int]] = []
    lo = 0
    while lo < len(data):
        hi, size = lo + 1, len(data[lo])
        while hi < len(data) and size + len(data[hi]) <= most:
            size += len(data[hi])
            hi += 1
        spans.append((lo, hi))
        lo = hi

    def make(span: tuple[int, int]) -> tuple[list[int], list[np.ndarray | None]] | None:
        a, b = span
        return shingle_sets(lib, data[a:b], kinds[a:b], fields, ngram, None if digests is None else digests[a:b])

    for n in range(0, len(spans), 2):
        pair = spans[n : n + 2]
        later = aside.submit(make, pair[1]) if aside is not None and len(pair) == 2 else None
        results = [make(pair[0])] + ([later.result()] if later is not None else [make(span) for span in pair[1:]])
        for (a, b), made in zip(pair, results):
            yield a, b, made
