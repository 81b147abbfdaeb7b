"""dedup's kept sketches in C (documents.c, shc_codes_*): runs of sorted LSH window codes merged, searched and marked
in a bit map, the serial part of `simq dedup` (pipeline/dedup.py KeptSketches). Each function gives what its numpy
reference there gives, value for value (tests/test_document_path.py), or None (False) where the reference must run
(no C core, an older build). ctypes releases the GIL for the call."""

from __future__ import annotations

import ctypes

import numpy as np

from . import _declared, core

_P, _SIZE = ctypes.c_void_p, ctypes.c_size_t
_MERGE = (_P, _SIZE, _P, _SIZE, ctypes.c_uint64, _P)


def _function(name: str, argtypes: tuple):
    lib = core()
    return None if lib is None else _declared(lib, name, ctypes.c_int, argtypes)


def can_merge() -> bool:
    """merge_into() runs in C here."""
    return _function("shc_codes_merge", _MERGE) is not None


def merge_into(out: np.ndarray, older: np.ndarray, newer: np.ndarray, add: int) -> bool:
    """out[:len(older) + len(newer)] = two sorted uint64 runs merged, newer's values plus `add` (a stable sort of
    their concatenation). out may begin with older itself (a run with room after it: merged in place, no new
    array); False where the reference must run (nothing written)."""
    function = _function("shc_codes_merge", _MERGE)
    need = len(older) + len(newer)
    if function is None or out.dtype != np.uint64 or not out.flags.c_contiguous or len(out) < need:
        return False
    if len(older) and not (older.flags.c_contiguous and older.dtype == np.uint64):
        return False
    if len(older) and np.shares_memory(out, older) and older.ctypes.data != out.ctypes.data:
        return False  # (only older at out's start can be merged in place)
    newer = np.ascontiguousarray(newer, dtype=np.uint64)
    if np.shares_memory(out, newer):  # (written over as it is read)
        newer = newer.copy()
    return function(older.ctypes.data if len(older) else None, len(older), newer.ctypes.data, len(newer), add,
                    out.ctypes.data) == 0


def found(run: np.ndarray, queries: np.ndarray, low_bits: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(query positions, run positions) of every query code whose top bits (above low_bits) a run code shares:
    the positions are the codes' low bits, in the queries' order and each query's in the run's (run sorted)."""
    function = _function("shc_codes_find", (_P, _SIZE, _P, _SIZE, ctypes.c_int, _P, _P, _SIZE, _P))
    if function is None:
        return None
    run, queries = np.ascontiguousarray(run, np.uint64), np.ascontiguousarray(queries, np.uint64)
    count = ctypes.c_size_t()
    room = 2 * len(queries) + 64  # (most codes find none or one: one call, seldom two)
    while True:
        q, position = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
        if function(run.ctypes.data, len(run), queries.ctypes.data, len(queries), low_bits, q.ctypes.data,
                    position.ctypes.data, room, ctypes.byref(count)):
            return None
        if count.value <= room:
            return q[: count.value], position[: count.value]
        room = count.value


def marked(seen: np.ndarray, codes: np.ndarray, bits: int) -> bool:
    """Set bit code >> (63 - bits) of the bit map `seen` (uint8) for each code; False where the reference must
    run (nothing written)."""
    function = _function("shc_codes_mark", (_P, _SIZE, _P, _SIZE, ctypes.c_int))
    if function is None or not seen.flags.c_contiguous or seen.dtype != np.uint8:
        return False
    codes = np.ascontiguousarray(codes, np.uint64)
    return function(seen.ctypes.data, seen.nbytes, codes.ctypes.data, len(codes), bits) == 0
