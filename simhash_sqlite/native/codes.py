"""dedup's kept sketches in C (documents.c, shc_codes_*): runs of sorted LSH window codes merged and marked in a
bit map, the serial part of `simq dedup` (pipeline/dedup.py KeptSketches). Each function gives what its numpy
reference there gives, value for value (tests/test_document_path.py), or None where the reference must run (no C
core, an older build). ctypes releases the GIL for the call."""

from __future__ import annotations

import ctypes

import numpy as np

from . import _declared, core

_P, _SIZE = ctypes.c_void_p, ctypes.c_size_t


def _function(name: str, argtypes: tuple):
    lib = core()
    return None if lib is None else _declared(lib, name, ctypes.c_int, argtypes)


def merged(older: np.ndarray, newer: np.ndarray, add: int) -> np.ndarray | None:
    """Two sorted uint64 runs merged, newer's values plus `add` (a stable sort of their concatenation)."""
    function = _function("shc_codes_merge", (_P, _SIZE, _P, _SIZE, ctypes.c_uint64, _P))
    if function is None:
        return None
    older, newer = np.ascontiguousarray(older, np.uint64), np.ascontiguousarray(newer, np.uint64)
    out = np.empty(len(older) + len(newer), dtype=np.uint64)
    if function(older.ctypes.data, len(older), newer.ctypes.data, len(newer), add, out.ctypes.data):
        return None
    return out


def marked(seen: np.ndarray, codes: np.ndarray, bits: int) -> bool:
    """Set bit code >> (63 - bits) of the bit map `seen` (uint8) for each code; False where the reference must
    run (nothing written)."""
    function = _function("shc_codes_mark", (_P, _SIZE, _P, _SIZE, ctypes.c_int))
    if function is None or not seen.flags.c_contiguous or seen.dtype != np.uint8:
        return False
    codes = np.ascontiguousarray(codes, np.uint64)
    return function(seen.ctypes.data, seen.nbytes, codes.ctypes.data, len(codes), bits) == 0
