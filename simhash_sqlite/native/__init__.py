"""The C core (simhash_core.c) from Python, through ctypes: the package's fast path.

ctypes over a plain shared library, not a CPython extension: the library needs no Python.h (the same
file builds on any interpreter and is the one the SQLite extension compiles in), and a ctypes call
releases the GIL while the C code runs, so threads fingerprint in parallel. One call handles a batch of
texts (one UTF-8 buffer and offsets), so the per-call cost of ctypes (a few microseconds) is shared.

The core computes only what it can compute exactly (simhash_core.h): character n-gram fingerprints of
any weights and the sketches of every scheme. A text it declines (a lone surrogate, a character that
needs full NFKC or case-folds to several characters, a rounding too near a tie) comes back flagged,
and the caller computes it with the numpy reference; so does every setting it does not support
(features="words").

The switch: SIMHASH_SQLITE_CORE=python forces the numpy reference everywhere; =native makes an
unavailable core an error instead of a quiet fallback (for tests and benches); unset or "auto" uses the
core when it is built and its Unicode tables are this Python's. describe() says which core runs and,
if not the native one, why not (`simq --version`).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SimhashError

if TYPE_CHECKING:
    import numpy as np

# numpy is imported by the functions that use it: fingerprint_one() and the loading of the core need none, so
# that `simq hash` and `simq near --key` start without it (quick/lane.py).

ABI_VERSION = 2  # simhash_core.h SHC_ABI_VERSION
SWITCH = "SIMHASH_SQLITE_CORE"
# Which kernels the core runs: unset for the best this CPU runs; "portable", "avx2" or "avx512" for tests
# and benches (an error where this CPU or build cannot run them: use_kernels).
KERNELS = "SIMHASH_SQLITE_KERNELS"
HERE = Path(__file__).resolve().parent

HAS_FINGERPRINT, HAS_SKETCH, DECLINED = 0x01, 0x02, 0x80
WEIGHTS = {"binary": 0, "count": 1, "log": 2}
# Bytes of text per C call (characters where texts come as str): bounds the batch buffer; many texts per
# call share its overhead. Small enough that the allocator reuses the buffer from call to call: a larger
# one (4 MiB) came from the kernel afresh on most calls, its page faults 4% of the English Python docs'
# time through batch() (bench/core_speed.py), and it is read again while still in the cache.
BATCH_BYTES = 1 << 19


class NativeUnavailable(SimhashError, RuntimeError):
    """SIMHASH_SQLITE_CORE=native, but the core cannot be used, or the switch has another value (the
    message says why; the CLI prints it as one error line)."""


class _Scheme(ctypes.Structure):
    _fields_ = [("bins", ctypes.c_int32), ("bits", ctypes.c_int32), ("size_bits", ctypes.c_int32)]


def library_suffix() -> str:
    return {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")


def library_path(name: str = "_simhash_core") -> Path:
    """Where the build puts the library `name` (it may be absent)."""
    return HERE / (name + library_suffix())


def build_report() -> dict:
    """What the install's build recorded (hatch_build.py): {target: {"built", "file", "reason"}}; {} if none."""
    try:
        return json.loads((HERE / "_build.json").read_text())
    except (OSError, ValueError):
        return {}


@dataclass(frozen=True)
class _Loaded:
    lib: ctypes.CDLL | None
    why_not: str  # "" when lib is usable
    unidata: str = ""


@lru_cache(maxsize=None)
def _load(path: str) -> _Loaded:
    file = Path(path)
    if not file.exists():
        reason = build_report().get("_simhash_core", {}).get("reason")
        return _Loaded(None, f"not built ({reason})" if reason else "not built")
    try:
        lib = ctypes.CDLL(str(file))
    except OSError as exc:
        return _Loaded(None, f"cannot load {file.name}: {exc}")
    try:
        lib.shc_abi_version.restype = ctypes.c_int
        if lib.shc_abi_version() != ABI_VERSION:
            return _Loaded(None, f"{file.name} is of another version (ABI {lib.shc_abi_version()}, want {ABI_VERSION})")
        lib.shc_unidata_version.restype = ctypes.c_char_p
        lib.shc_kernel.restype = ctypes.c_char_p
        lib.shc_set_kernel.restype = ctypes.c_int
        lib.shc_set_kernel.argtypes = [ctypes.c_char_p]
        unidata = lib.shc_unidata_version().decode()
    except AttributeError as exc:
        return _Loaded(None, f"{file.name} lacks a function: {exc}")
    if unidata != unicodedata.unidata_version:
        # Tables of another Unicode version would fold some characters differently: never silently.
        return _Loaded(
            None, f"built with Unicode {unidata}, this Python has {unicodedata.unidata_version} (reinstall the package)"
        )
    wanted = os.environ.get(KERNELS, "").strip().lower()
    if lib.shc_set_kernel(wanted.encode()):
        return _Loaded(None, f"{KERNELS}={wanted}: not kernels this CPU runs (portable, avx2, avx512: up to its best)")
    p, u8, i64, u64, f64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_double
    lib.shc_work_new.restype = p
    lib.shc_work_free.argtypes = [p]
    lib.shc_batch.restype = ctypes.c_int
    lib.shc_batch.argtypes = [p, p, p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_int32, p, p, p, p]
    lib.shc_estimate_many.restype = ctypes.c_int
    lib.shc_estimate_many.argtypes = [p, p, ctypes.c_size_t, p, p]
    lib.shc_sketch_bytes.restype = ctypes.c_size_t
    lib.shc_sketch_bytes.argtypes = [p]
    lib.shc_hamming.restype = ctypes.c_int
    lib.shc_hamming.argtypes = [u64, u64]
    lib.shc_window_pairs.restype = ctypes.c_int
    lib.shc_window_pairs.argtypes = [
        p, ctypes.c_size_t, p, p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
        f64, p, p, p, p, ctypes.c_size_t, p,
    ]  # fmt: skip
    lib.shc_sort_packed.restype = ctypes.c_int
    lib.shc_sort_packed.argtypes = [p, ctypes.c_size_t, ctypes.c_int32, p]
    lib.shc_pack_window.restype = ctypes.c_int
    lib.shc_pack_window.argtypes = [p, p, p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, p]
    del u8, i64, f64
    return _Loaded(lib, "", unidata)


def use_kernels(lib: ctypes.CDLL, name: str = "") -> None:
    """Run the named kernels ("portable", "avx2", "avx512"; "" for the best this CPU runs) in this process
    from now on, for tests and benches (all give the same results). ValueError where this CPU cannot."""
    if lib.shc_set_kernel(name.encode()):
        raise ValueError(f"the C core cannot run {name!r} kernels here (it runs up to the best of this CPU)")


def kernels(lib: ctypes.CDLL) -> str:
    """The kernels the core runs now."""
    return lib.shc_kernel().decode()


@lru_cache(maxsize=None)
def _core_path() -> str:
    return str(library_path())


def _loaded() -> _Loaded:
    return _load(_core_path())  # (a Path made each call: a third of a core() call, made a text by the exact check)


def mode() -> str:
    """The switch's value: "python", "native" or "auto"."""
    value = os.environ.get(SWITCH, "auto").strip().lower() or "auto"
    if value not in ("python", "native", "auto"):
        raise NativeUnavailable(f"{SWITCH} must be python, native or auto, not {value!r}")
    return value


def core() -> ctypes.CDLL | None:
    """The loaded core, or None where the reference must run (the switch, or the core is unavailable)."""
    wanted = mode()
    if wanted == "python":
        return None
    loaded = _loaded()
    if loaded.lib is None and wanted == "native":
        raise NativeUnavailable(f"{SWITCH}=native, but the C core is {loaded.why_not}")
    return loaded.lib


def describe() -> str:
    """Which core runs, for `simq --version`: "native (portable kernels, Unicode 15.0.0)" or
    "python (numpy reference: ...why...)"."""
    wanted = os.environ.get(SWITCH, "auto").strip().lower() or "auto"
    if wanted not in ("python", "native", "auto"):
        return f"none: {SWITCH} must be python, native or auto, not {wanted!r}"
    if wanted == "python":
        return f"python (numpy reference: {SWITCH}=python)"
    loaded = _loaded()
    if loaded.lib is None:
        return f"python (numpy reference: the C core is {loaded.why_not})"
    return f"native (C core, {kernels(loaded.lib)} kernels, Unicode {loaded.unidata})"


class _Scratch:
    """One shc_work (the core's scratch memory: its buffers grow to the largest text and stay), freed
    when its thread ends (the thread's local attributes go) or when dropped after a huge text."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.pointer = lib.shc_work_new()
        if not self.pointer:
            raise MemoryError("the C core could not allocate its scratch memory")

    def __del__(self) -> None:
        if getattr(self, "pointer", None):
            self.lib.shc_work_free(self.pointer)
            self.pointer = None


_local = threading.local()
# After a text of more bytes than this, the thread's scratch memory (some 30 bytes per byte of the
# largest text) is given back rather than kept for the next call.
KEEP_SCRATCH_BYTES = 1 << 24


def _scratch(lib: ctypes.CDLL) -> _Scratch:
    scratch = getattr(_local, "scratch", None)
    if scratch is None or scratch.lib is not lib:
        scratch = _local.scratch = _Scratch(lib)
    return scratch


def scheme_struct(scheme) -> _Scheme:
    return _Scheme(scheme.bins, scheme.bits, scheme.size_bits)


def supports(settings) -> bool:
    """Whether the core computes fingerprints of these FingerprintSettings (character n-grams)."""
    return settings.features == "chars" and settings.weights in WEIGHTS and 1 <= settings.ngram <= 16


def encode(texts) -> tuple[bytes, np.ndarray]:
    """The texts as one UTF-8 buffer (lone surrogates kept as 'surrogatepass' writes them, which the core
    declines) and the n + 1 offsets of their starts and the end."""
    return encode_parts([t.encode("utf-8", "surrogatepass") for t in texts])


def encode_parts(parts: list[bytes]) -> tuple[bytes, np.ndarray]:
    """encode() of texts already in UTF-8 ('surrogatepass'), one bytes object each."""
    import numpy as np

    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=offsets[1:])
    return b"".join(parts), offsets


def _runs(sizes: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """[start, end) runs of consecutive items, each ending at the first item that brings its sum of
    sizes to limit or more (or at the last item): one item at least."""
    import numpy as np

    ends = np.cumsum(sizes)
    runs, start, n = [], 0, len(sizes)
    while start < n:
        before = int(ends[start - 1]) if start else 0
        end = min(int(np.searchsorted(ends, before + limit, side="left")) + 1, n)
        runs.append((start, end))
        start = end
    return runs


def batch(
    lib: ctypes.CDLL, texts, *, ngram: int = 5, weights: str = "binary", scheme=None, fingerprints: bool = True,
    utf8: list[bytes] | None = None,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """The core over the texts: (fingerprints uint64 or None, sketch rows (n, nbytes) uint8 or None,
    status uint8). Declined texts have status & DECLINED: the caller computes them with the reference.
    utf8: the texts as encode() would write each, where the caller has them (not encoded again)."""
    import numpy as np

    if not isinstance(texts, list):
        texts = list(texts)
    if utf8 is not None and len(utf8) != len(texts):
        raise ValueError(f"{len(utf8)} encoded texts for {len(texts)} texts")
    n = len(texts)
    fps = np.zeros(n, dtype=np.uint64) if fingerprints else None
    rows = None
    c_scheme = None
    if scheme is not None:
        c_scheme = scheme_struct(scheme)
        nbytes = lib.shc_sketch_bytes(ctypes.byref(c_scheme))
        if not nbytes:
            raise ValueError(f"the C core does not support the sketch scheme {scheme}")
        rows = np.zeros((n, nbytes), dtype=np.uint8)
    status = np.zeros(n, dtype=np.uint8)
    work = _scratch(lib).pointer
    largest = 0
    # runs of texts of about BATCH_BYTES (characters where the texts are str: the bytes are not known yet)
    sizes = np.fromiter(map(len, texts if utf8 is None else utf8), dtype=np.int64, count=n)
    for start, end in _runs(sizes, BATCH_BYTES):
        buf, offsets = encode(texts[start:end]) if utf8 is None else encode_parts(utf8[start:end])
        largest = max(largest, int(np.diff(offsets).max()))
        code = lib.shc_batch(
            work, buf, offsets.ctypes.data, end - start, ngram, WEIGHTS[weights],
            ctypes.byref(c_scheme) if c_scheme is not None else None,
            fps[start:].ctypes.data if fps is not None else None,
            rows[start:].ctypes.data if rows is not None else None,
            status[start:].ctypes.data,
        )  # fmt: skip
        if code:
            raise ValueError(f"the C core refused the batch (error {code})")
    if largest > KEEP_SCRATCH_BYTES:
        _local.scratch = None
    return fps, rows, status


def fingerprint_one(lib: ctypes.CDLL, text: str, *, ngram: int, weights: str, scheme=None) -> tuple[int, bytes, int]:
    """batch() of one text without numpy: (fingerprint, sketch bytes (b"" without a scheme), status), each as
    batch() gives it (the caller reads status for HAS_FINGERPRINT, HAS_SKETCH and DECLINED)."""
    utf8 = text.encode("utf-8", "surrogatepass")
    offsets = (ctypes.c_int64 * 2)(0, len(utf8))
    fingerprint = (ctypes.c_uint64 * 1)()
    status = (ctypes.c_uint8 * 1)()
    c_scheme = None if scheme is None else scheme_struct(scheme)
    nbytes = 0 if c_scheme is None else lib.shc_sketch_bytes(ctypes.byref(c_scheme))
    if c_scheme is not None and not nbytes:
        raise ValueError(f"the C core does not support the sketch scheme {scheme}")
    sketch = (ctypes.c_uint8 * max(nbytes, 1))()
    code = lib.shc_batch(
        _scratch(lib).pointer, utf8, offsets, 1, ngram, WEIGHTS[weights],
        ctypes.byref(c_scheme) if c_scheme is not None else None, fingerprint, sketch if nbytes else None, status,
    )  # fmt: skip
    if code:
        raise ValueError(f"the C core refused the text (error {code})")
    if len(utf8) > KEEP_SCRATCH_BYTES:
        _local.scratch = None
    return fingerprint[0], bytes(sketch)[:nbytes], status[0]


class _Cursor(ctypes.Structure):
    _fields_ = [("i", ctypes.c_int64), ("j", ctypes.c_int64)]


# Pairs one call of shc_window_pairs writes at most (24 bytes each).
WINDOW_PAIRS_CHUNK = 1 << 18


def window_pairs(
    lib: ctypes.CDLL, rows: np.ndarray, packed: np.ndarray, position_bits: int, width: int, step: int, table: int,
    threshold: float, scheme, chunk: int = WINDOW_PAIRS_CHUNK,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs one LSH table of sketch_pairs contributes (simhash_core.h, shc_window_pairs): (left,
    right, estimate) of the rows p < q sharing the table's key that agree on no earlier window and whose
    estimate is >= threshold. rows: (n, nbytes) uint8 sketches; packed: the table's sorted
    (key << position_bits | row) words."""
    import numpy as np

    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    packed = np.ascontiguousarray(packed, dtype=np.uint64)
    c_scheme = scheme_struct(scheme)
    if rows.ndim != 2 or rows.shape[1] != lib.shc_sketch_bytes(ctypes.byref(c_scheme)):
        raise ValueError(f"sketch rows of shape {rows.shape} do not fit the scheme {scheme}")
    cursor, count = _Cursor(0, 0), ctypes.c_size_t(0)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    while True:
        left, right = np.empty(chunk, dtype=np.int64), np.empty(chunk, dtype=np.int64)
        estimate = np.empty(chunk, dtype=np.float64)
        code = lib.shc_window_pairs(
            rows.ctypes.data, len(rows), ctypes.byref(c_scheme), packed.ctypes.data, len(packed), position_bits,
            width, step, table, threshold, ctypes.byref(cursor), left.ctypes.data, right.ctypes.data,
            estimate.ctypes.data, chunk, ctypes.byref(count),
        )  # fmt: skip
        if code < 0:
            raise ValueError(f"the C core refused the LSH table (error {code})")
        got = count.value
        parts.append((left[:got].copy(), right[:got].copy(), estimate[:got].copy()) if got < chunk else
                     (left, right, estimate))  # fmt: skip
        if code == 0:
            break
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(column) for column in zip(*parts))  # type: ignore[return-value]


def sort_packed(lib: ctypes.CDLL, packed: np.ndarray, low: int, scratch: np.ndarray | None = None) -> None:
    """packed (uint64, contiguous) sorted in place, as packed.sort() does (simhash_core.h, shc_sort_packed):
    with scratch (uint64, room for as many words) dealt out by their bits from `low` up, 6x numpy's sort
    where the bits below ascend within a key (an LSH table's rows); without it, an in-place radix sort
    (2.5x)."""
    import numpy as np

    if packed.dtype != np.uint64 or not packed.flags.c_contiguous or not packed.flags.writeable:
        raise ValueError("sort_packed sorts a writeable contiguous uint64 array in place")
    room = None
    if scratch is not None:
        if scratch.dtype != np.uint64 or not scratch.flags.c_contiguous or len(scratch) < len(packed):
            raise ValueError("sort_packed's scratch must be a contiguous uint64 array as long as the words")
        room = scratch.ctypes.data
    if lib.shc_sort_packed(packed.ctypes.data, len(packed), low, room) != 0:
        raise ValueError(f"the C core refused to sort words by their bits from {low} up")


def pack_window(
    lib: ctypes.CDLL, words: np.ndarray, start: int, width: int, low: int, low_words: np.ndarray
) -> np.ndarray:
    """sketch_pairs' (window_keys(words, start, width) << low | low_words) in one pass (shc_pack_window): words
    (nwords, n) uint64, as sketch_pairs._words makes them; low_words n uint64."""
    import numpy as np

    index, shift = divmod(start, 64)
    n = words.shape[1]
    if words.dtype != np.uint64 or low_words.dtype != np.uint64 or len(low_words) != n or not 0 <= index < len(words):
        raise ValueError("pack_window takes uint64 words (nwords, n) and n uint64 low words")
    lo, below = np.ascontiguousarray(words[index]), np.ascontiguousarray(low_words)  # (rows of _words: no copy)
    hi = np.ascontiguousarray(words[index + 1]) if index + 1 < len(words) else None
    out = np.empty(n, dtype=np.uint64)
    if lib.shc_pack_window(lo.ctypes.data, None if hi is None else hi.ctypes.data, below.ctypes.data, n, shift,
                           width, low, out.ctypes.data) != 0:
        raise ValueError(f"the C core refused the window of {width} bits at {start} over {low} low bits")
    return out


def estimate_many(lib: ctypes.CDLL, a: np.ndarray, b: np.ndarray, scheme) -> np.ndarray:
    """sketch.estimate_many in C: a and b (pairs, nbytes) uint8 rows."""
    import numpy as np

    a = np.ascontiguousarray(a, dtype=np.uint8)
    b = np.ascontiguousarray(b, dtype=np.uint8)
    out = np.empty(len(a), dtype=np.float64)
    c_scheme = scheme_struct(scheme)
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] != lib.shc_sketch_bytes(ctypes.byref(c_scheme)):
        raise ValueError(f"sketch rows of shapes {a.shape} and {b.shape} do not fit the scheme {scheme}")
    code = lib.shc_estimate_many(a.ctypes.data, b.ctypes.data, len(a), ctypes.byref(c_scheme), out.ctypes.data)
    if code:
        raise ValueError(f"the C core refused the estimate (error {code})")
    return out


# The loadable SQLite extension (sqlite_extension.c): its path and a loader, as sqlite_vec's.
from .extension import ExtensionMissing, load, loadable_path  # noqa: E402, F401


def text_shingles(lib: ctypes.CDLL, text: str, n: int) -> list[int] | None:
    """core/shingles.shingle_set(text, n) without numpy, as the extension's exact check makes it: the text
    normalised by shc_normalize (features.normalize, bit for bit) and shingled by shc_shingle_set; a sorted
    list. None where the core declines the text (invalid UTF-8, a lone surrogate, memory) or lacks the
    functions: the reference answers."""
    normalize, shingles = _normalize_function(lib), _shingle_set_function(lib)
    if normalize is None or shingles is None:
        return None
    utf8 = text.encode("utf-8", "surrogatepass")
    units, count, status = ctypes.POINTER(ctypes.c_uint32)(), ctypes.c_size_t(), ctypes.c_uint8()
    if normalize(_scratch(lib).pointer, utf8, len(utf8), ctypes.byref(units), ctypes.byref(count),
                 ctypes.byref(status)) or status.value:
        return None
    out = (ctypes.c_uint64 * max(count.value, 1))()
    made = shingles(units, count.value, n, out) if count.value else 0  # (an empty text: no shingle)
    if len(utf8) > KEEP_SCRATCH_BYTES:
        _local.scratch = None
    return out[:made]


def _normalize_function(lib: ctypes.CDLL):
    return _declared(lib, "shc_normalize", ctypes.c_int, (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p))


def _shingle_set_function(lib: ctypes.CDLL):
    return _declared(lib, "shc_shingle_set", ctypes.c_size_t,
                     (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p))


@lru_cache(maxsize=None)
def _declared(lib: ctypes.CDLL, name: str, restype, argtypes: tuple):
    """lib's function `name`, declared; None where this library lacks it (an older build)."""
    try:
        function = getattr(lib, name)
    except AttributeError:
        return None
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


def shingle_set(units: np.ndarray, n: int) -> np.ndarray | None:
    """core/shingles.shingle_set's sorted distinct hashes of the n-unit shingles of normalized code points
    (uint32), in C; None where the reference must run."""
    import numpy as np

    lib = core()
    function = _shingle_set_function(lib) if lib is not None else None
    if function is None:
        return None
    units = np.ascontiguousarray(units, dtype=np.uint32)
    out = np.empty(len(units), dtype=np.uint64)
    count = function(units.ctypes.data, len(units), n, out.ctypes.data)
    # (a set much smaller than its text, a repetitive one, is copied out: a view would hold all of out)
    return out[:count] if 2 * count >= len(out) else out[:count].copy()


def jaccards(a: list[np.ndarray], b: list[np.ndarray]) -> np.ndarray | None:
    """core/shingles.jaccard_of_sets of each pair of sorted distinct uint64 sets (a[i], b[i]), in one C call
    (shc_docs_jaccards; each set passed once however many pairs name it); None where the reference must run."""
    import numpy as np

    lib = core()
    function = _declared(lib, "shc_docs_jaccards", ctypes.c_int, (
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p,
        ctypes.c_size_t, ctypes.c_void_p)) if lib is not None else None
    if function is None:
        return None
    number: dict[int, int] = {}
    sets: list[np.ndarray] = []
    for x in a + b:
        if id(x) not in number:  # (all alive for the call: an id is not reused)
            number[id(x)] = len(sets)
            sets.append(x)
    flat = np.concatenate(sets).astype(np.uint64, copy=False) if sets else np.empty(0, np.uint64)
    ends = np.cumsum(np.fromiter(map(len, sets), dtype=np.int64, count=len(sets)))
    left = np.fromiter((number[id(x)] for x in a), dtype=np.int64, count=len(a))
    right = np.fromiter((number[id(x)] for x in b), dtype=np.int64, count=len(b))
    out = np.empty(len(a), dtype=np.float64)
    if function(flat.ctypes.data, len(flat), ends.ctypes.data, len(sets), left.ctypes.data, right.ctypes.data,
                len(a), out.ctypes.data):
        return None
    return out
