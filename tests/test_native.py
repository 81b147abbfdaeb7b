"""The C core (simhash_sqlite/native) against the numpy reference: bit-identical fingerprints, sketches and
estimates on the golden files and on generated text of every kind; texts it declines are computed by
the reference; the switch; and the package without the library."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from golden_sketches import GOLDEN as GOLDEN_SKETCHES
from golden_sketches import golden_texts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_sqlite import native
from simhash_sqlite.core.fingerprint import (
    reference_simhash_and_sketch_many,
    reference_simhash_many,
    simhash_and_sketch_many,
    simhash_many,
    to_hex,
)
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.core.sketch import (
    DEFAULT_SCHEME,
    SCHEME_V1,
    SketchScheme,
    estimate_many,
    reference_estimate_many,
    reference_sketch_many,
    sketch_many,
)

LIB = native._loaded().lib
needs_core = pytest.mark.skipif(
    LIB is None or os.environ.get(native.SWITCH, "").lower() == "python",
    reason=f"the C core is not in use: {native.describe()}",
)

SCHEMES = [DEFAULT_SCHEME, SCHEME_V1, SketchScheme(bins=240, bits=2), SketchScheme(bins=30, bits=16, size_bits=16),
           SketchScheme(bins=120, bits=4, size_bits=16), SketchScheme(bins=3, bits=8),
           SketchScheme(bins=1024, bits=1), SketchScheme(bins=1032, bits=1)]  # fmt: skip
SETTINGS = [FingerprintSettings(ngram=n, weights=w) for n in (1, 2, 3, 5, 7, 16) for w in ("binary", "count", "log")]

# Characters that stress each step: controls and Python's odd whitespace (\x1c-\x1f, U+0085 are
# str.isspace), combining marks (some compose with what precedes them), full-width forms and the
# ideographic space, compatibility characters (ellipsis, no-break space, ligatures, U+FDFA expands to
# 18 characters, mathematical letters beyond the BMP), multi-character case folds (sharp s, dotted I,
# ligatures), Hangul jamo that compose, emoji, lone surrogates, noncharacters and private use.
SPECIAL = (
    list("\x00\x01\x07\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x7f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000")
    + [chr(c) for c in (0x300, 0x301, 0x308, 0x316, 0x323, 0x345, 0x5B0, 0x93C, 0x9BE, 0x9C7, 0x3099, 0x309A)]
    + [chr(c) for c in (0xFF01, 0xFF21, 0xFF41, 0xFF5E, 0xFF5F, 0xFF61, 0xFFE5)]
    + list("\u2026\u00bd\u2122\u2160\u212a\u2126\ufb01\ufb00\ufdfa\u3300\u00b2\u1d2c\u33ff")
    + ["\U0001d400", "\U0001d7ce", "\U0001f130", "\u0130", "\u00df", "\u1e9e", "\u0149", "\u1f80", "\ufb06"]
    + list("\u1100\u1161\u11a8\uac00\u3131\u314f")
    + ["\U0001f600", "\U0001f44d\U0001f3fd", "\u200d", "\ufe0f", "\U0001f1fa\U0001f1f8"]
    + ["\ud800", "\udfff", "\ud83d"]
    + ["\ufffe", "\uffff", "\U0010ffff", "\ue000", "\U000e0001"]
    + list("aAzZ09_-.,!?éÉçΣσςДдאب中文字近似重复ｱ")
)
any_character = st.characters(min_codepoint=0, max_codepoint=0x10FFFF)  # every plane (no surrogates)
characters = st.one_of(st.sampled_from(SPECIAL), any_character, st.sampled_from(list("abc de 中文 ")))
texts = st.lists(characters, max_size=60).map("".join)
batches = st.lists(texts, min_size=1, max_size=12)


def _outcome(function, *args):
    """What a call gives, or the type of what it raises (the reference raises on some lone surrogates)."""
    try:
        return function(*args)
    except Exception as exc:  # noqa: BLE001 - compared, not hidden
        return type(exc).__name__


def _raw(texts_, **kwargs):
    """The core alone: (fingerprints, rows, status) with no fallback."""
    return native.batch(LIB, texts_, **kwargs)


@needs_core
def test_golden_fingerprints_bit_identical():
    rows = [json.loads(line) for line in (Path(__file__).parent / "golden" / "fingerprints.jsonl").open()]
    checked = 0
    for row in rows:
        settings_ = FingerprintSettings(**row["settings"])
        if not native.supports(settings_):
            continue
        values, _, status = _raw([row["text"]], ngram=settings_.ngram, weights=settings_.weights)
        assert not status[0] & native.DECLINED, row
        got = to_hex(int(values[0])) if status[0] & native.HAS_FINGERPRINT else None
        assert got == row["simhash"], row
        checked += 1
    assert checked >= 39


@needs_core
def test_golden_sketches_bit_identical():
    texts_ = golden_texts()
    rows = [json.loads(line) for line in GOLDEN_SKETCHES.open()]
    by_scheme: dict[tuple[int, int], list[dict]] = {}
    for row in rows:
        by_scheme.setdefault((row["bins"], row["bits"]), []).append(row)
    declined = 0
    for (bins, bits), expected in by_scheme.items():
        chosen = texts_ if (bins, bits) == (960, 1) else texts_[::4]
        _, made, status = _raw(chosen, scheme=SketchScheme(bins=bins, bits=bits), fingerprints=False)
        for row, made_row, code in zip(expected, made, status.tolist()):
            if code & native.DECLINED:
                declined += 1
                continue
            assert (made_row.tobytes().hex() if code & native.HAS_SKETCH else None) == row["sketch"]
        # and through the package's function, declined texts included
        rows_, present = sketch_many(chosen, SketchScheme(bins=bins, bits=bits))
        assert [r.tobytes().hex() if p else None for r, p in zip(rows_, present)] == [e["sketch"] for e in expected]
    assert declined == 0


@needs_core
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, st.sampled_from(SETTINGS), st.sampled_from(SCHEMES))
def test_fingerprints_and_sketches_equal_the_reference(batch, settings_, scheme):
    expected = _outcome(reference_simhash_and_sketch_many, batch, settings_, scheme)
    assert _outcome(simhash_and_sketch_many, batch, settings_, scheme) == expected
    if isinstance(expected, str):
        return
    # the core alone, where it did not decline
    values, rows, status = _raw(batch, ngram=settings_.ngram, weights=settings_.weights, scheme=scheme)
    for i, code in enumerate(status.tolist()):
        if code & native.DECLINED:
            continue
        assert (int(values[i]) if code & native.HAS_FINGERPRINT else None) == expected[0][i]
        assert (rows[i].tobytes() if code & native.HAS_SKETCH else None) == expected[1][i]


@needs_core
@settings(max_examples=150, deadline=None)
@given(batches, st.sampled_from(SETTINGS))
def test_fingerprints_alone_equal_the_reference(batch, settings_):
    assert _outcome(simhash_many, batch, settings_) == _outcome(reference_simhash_many, batch, settings_)


@needs_core
@settings(max_examples=150, deadline=None)
@given(batches, st.sampled_from(SCHEMES))
def test_sketches_alone_equal_the_reference(batch, scheme):
    expected = _outcome(reference_sketch_many, batch, scheme)
    got = _outcome(sketch_many, batch, scheme)
    if isinstance(expected, str):
        assert got == expected
    else:
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])


@needs_core
def test_what_it_declines_and_what_it_computes():
    both, surrogate = native.HAS_FINGERPRINT | native.HAS_SKETCH, native.DECLINED | 2
    cases = {
        "": 0,  # no features
        "!!! ...": 0,
        "x": both,
        "ＡＢＣ　ａｂｃ Straße … ﬁnal \u00a0 \U0001d400 \ufdfa": both,  # compatibility forms, multi-character folds
        "a\u0316\u0305b": both,  # marks that compose with nothing, in canonical order
        "\u0301abc": both,  # a mark that composes with some letters, with none before it
        "x\u0301 \u0995\u09be \u091c\u093c": both,  # ... after letters it does not compose with
        "e\u0301t": both,  # it does compose with e (to \u00e9): full NFKC (nfkc.h)
        "\u00e9\u0323": both,  # a mark after a letter with a decomposition
        "a\u0301\u0316b": both,  # marks out of canonical order
        "Jos\u00b4e \u00b4": both,  # NFKC: a space and a mark (issue 36 item 8)
        "\u1100\u1161\u11a8 \uac00\u11a8": both,  # conjoining jamo
        "ab\ud800cd": surrogate,
    }
    _, _, status = _raw(list(cases), scheme=DEFAULT_SCHEME)
    assert dict(zip(cases, status.tolist())) == cases
    # each of them, through the package, is what the reference makes
    for text in cases:
        assert _outcome(simhash_and_sketch_many, [text], FingerprintSettings(), DEFAULT_SCHEME) == _outcome(
            reference_simhash_and_sketch_many, [text], FingerprintSettings(), DEFAULT_SCHEME
        )


@needs_core
def test_invalid_utf8_and_bad_offsets_from_c():
    """The C API on bytes Python would never pass: declined per text, or an error for the call."""
    work = native._scratch(LIB).pointer
    scheme = native.scheme_struct(DEFAULT_SCHEME)
    bad = [b"\xff", b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"abc\xe4\xb8", b"\x80"]
    buf = b"".join(bad)
    offsets = np.cumsum([0] + [len(b) for b in bad]).astype(np.int64)
    fps = np.ones(len(bad), dtype=np.uint64)
    status = np.zeros(len(bad), dtype=np.uint8)
    rows = np.ones((len(bad), DEFAULT_SCHEME.nbytes), dtype=np.uint8)
    code = LIB.shc_batch(work, buf, offsets.ctypes.data, len(bad), 5, 0, ctypes.byref(scheme), fps.ctypes.data,
                         rows.ctypes.data, status.ctypes.data)  # fmt: skip
    assert code == 0
    assert status.tolist() == [native.DECLINED | 1] * 3 + [native.DECLINED | 2] + [native.DECLINED | 1] * 3
    assert not fps.any() and not rows.any()  # outputs of a declined text are zeros
    backwards = np.array([0, 3, 1], dtype=np.int64)
    assert LIB.shc_batch(work, b"abc", backwards.ctypes.data, 2, 5, 0, None, fps.ctypes.data, None,
                         status.ctypes.data) == -1  # fmt: skip
    assert LIB.shc_batch(work, b"abc", offsets.ctypes.data, 1, 0, 0, None, fps.ctypes.data, None,
                         status.ctypes.data) == -1  # ngram 0  # fmt: skip
    bad_scheme = native._Scheme(7, 1, 0)  # 7 one-bit bins do not fill a byte
    assert LIB.shc_sketch_bytes(ctypes.byref(bad_scheme)) == 0


@needs_core
@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(SCHEMES))
def test_estimates_equal_the_reference(data, scheme):
    pairs = data.draw(st.integers(1, 20))
    raw = data.draw(st.binary(min_size=2 * pairs * scheme.nbytes, max_size=2 * pairs * scheme.nbytes))
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(2 * pairs, scheme.nbytes)
    if data.draw(st.booleans()):  # near-duplicates: few bins differ, so the size rule matters
        rows = rows.copy()
        rows[pairs:, : scheme.bin_bytes] = rows[:pairs, : scheme.bin_bytes]
    a, b = rows[:pairs], rows[pairs:]
    assert estimate_many(a, b, scheme).tobytes() == reference_estimate_many(a, b, scheme).tobytes()


@needs_core
def test_every_size_code_decodes_as_numpy_does():
    """A pair with equal bins and sizes 1 and 2**((code-1)/2048) estimates 1/size: every code's size."""
    codes = np.arange(65536, dtype="<u2")
    a = np.zeros((len(codes), DEFAULT_SCHEME.nbytes), dtype=np.uint8)
    b = a.copy()
    a[:, DEFAULT_SCHEME.bin_bytes :] = codes.view(np.uint8).reshape(-1, 2)
    b[:, DEFAULT_SCHEME.bin_bytes :] = np.array([1], dtype="<u2").view(np.uint8)
    assert native.estimate_many(LIB, a, b, DEFAULT_SCHEME).tobytes() == reference_estimate_many(a, b).tobytes()


@needs_core
def test_log_weights_and_size_codes_of_repeats():
    """Log weights round(1000 (1 + ln c)) and the size code of many repeats and many distinct shingles."""
    texts_ = ["ab " * c for c in (1, 2, 3, 7, 100, 1000, 4097)] + [" ".join(map(str, range(c))) for c in (10, 3000)]
    for weights in ("log", "count", "binary"):
        settings_ = FingerprintSettings(weights=weights)
        values, rows, status = _raw(texts_, weights=weights, scheme=DEFAULT_SCHEME)
        assert not (status & native.DECLINED).any()
        expected = reference_simhash_and_sketch_many(texts_, settings_, DEFAULT_SCHEME)
        assert [int(v) for v in values] == expected[0]
        assert [r.tobytes() for r in rows] == expected[1]


def test_no_tie_within_the_margin_for_real_counts():
    """The core declines a rounding within 1e-9 of a tie (over 60 ulps: a log of another libm or SIMD
    kernel is a few ulps off at most); no count below 2**20 is that near, so nothing real is declined."""
    counts = np.arange(1, 1 << 20, dtype=np.float64)
    for x in (1000.0 * (1.0 + np.log(counts)), 2048.0 * np.log2(counts)):
        assert np.abs(x - np.floor(x) - 0.5).min() > 1e-9


@needs_core
@pytest.mark.slow
def test_a_huge_text():
    rng = np.random.default_rng(7)
    words = np.array(["near", "duplicate", "texts", "中文", "字", "Straße", "ＡＢＣ", "…", "x1"])
    text = " ".join(rng.choice(words, 600_000).tolist())
    for settings_ in (FingerprintSettings(), FingerprintSettings(weights="log", ngram=3)):
        _, _, status = _raw([text], ngram=settings_.ngram, weights=settings_.weights, scheme=DEFAULT_SCHEME)
        assert not status[0] & native.DECLINED
        assert simhash_and_sketch_many([text], settings_) == reference_simhash_and_sketch_many(
            [text], settings_, DEFAULT_SCHEME
        )


def _long_texts() -> list[str]:
    """Texts long enough for every path of the kernels: the ASCII loop 8 and 16 bytes at a time and its
    ends, whitespace runs (from every place of a 16-byte block), the carry-save bit sums (from 128
    distinct n-grams), sets of both sizes (past 8,192 n-grams), many repeats, CJK with ASCII between, and
    special characters that send a text down the general path or decline it."""
    rng = np.random.default_rng(26)
    words = ["near", "Duplicate", "texts", "the", "of", "and", "SQLite", "x1", "9", "a", "straße", "café"]
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 400)]
    special = [c for c in SPECIAL if not any(0xD800 <= ord(x) <= 0xDFFF for x in c)]  # (the reference raises)
    spaces = [" ", " ", " ", "  ", "\n", "\t ", "\x1c", " \n\n   "]
    out = []
    for length in (0, 1, 4, 7, 8, 9, 15, 16, 17, 130, 131, 300, 1_000, 3_000, 9_000, 20_000):
        out.append(" ".join(rng.choice(words, length // 5 + 1).tolist())[:length])
        out.append("".join(rng.choice(words).upper() + rng.choice(spaces) for _ in range(length // 5 + 1))[:length])
        out.append("".join(rng.choice(han) if rng.random() < 0.8 else rng.choice(["，", "。", " ", "ab", "Z"])
                           for _ in range(length)))  # fmt: skip
        out.append("".join(rng.choice(special) if rng.random() < 0.02 else chr(rng.integers(0x61, 0x7B))
                           for _ in range(length)))  # fmt: skip
    # whitespace runs of every length from every place of a 16-byte block, some ended by a non-ASCII
    # character, whitespace too (the 16-byte ASCII steps: where a block stops, and the whitespace before)
    out.append("".join("x" * at + " \t\n\x1c"[run % 4] * run + "é\u3000Ж\xa0中"[(run + at) % 6 :][:1] + "Ab"
                       for run in range(1, 24) for at in range(17)))  # fmt: skip
    out.append("abcde " * 5_000)  # one n-gram cycle: nearly all repeats
    out.append("".join(chr(rng.integers(0x20, 0x7F)) for _ in range(40_000)))  # distinct: the set at its largest
    return out


@needs_core
@pytest.mark.parametrize("kernel", ["portable", "avx2", "avx512"])
def test_every_kernel_equals_the_reference_on_long_texts(kernel):
    """Each kernel this CPU runs (the core picks the best; the others run on older CPUs), bit-identical."""
    try:
        native.use_kernels(LIB, kernel)
    except ValueError:
        pytest.skip(f"this CPU does not run the {kernel} kernels")
    try:
        assert native.kernels(LIB) == kernel
        texts_ = _long_texts()
        settings_list = [FingerprintSettings(), FingerprintSettings(weights="count"),
                         FingerprintSettings(weights="log"), FingerprintSettings(ngram=3)]  # fmt: skip
        for settings_ in settings_list:
            for scheme in (DEFAULT_SCHEME, SCHEME_V1, SketchScheme(bins=240, bits=2), SketchScheme(bins=30, bits=16),
                           SketchScheme(bins=1024, bits=1), SketchScheme(bins=1032, bits=1)):
                expected = reference_simhash_and_sketch_many(texts_, settings_, scheme)
                values, rows, status = _raw(texts_, ngram=settings_.ngram, weights=settings_.weights, scheme=scheme)
                computed = 0
                for i, code in enumerate(status.tolist()):
                    if code & native.DECLINED:
                        continue
                    computed += 1
                    assert (int(values[i]) if code & native.HAS_FINGERPRINT else None) == expected[0][i], (i, settings_)
                    assert (rows[i].tobytes() if code & native.HAS_SKETCH else None) == expected[1][i], (i, scheme)
                assert computed >= len(texts_) * 3 // 4
    finally:
        native.use_kernels(LIB, "")


def _runs_one_by_one(sizes: list[int], limit: int) -> list[tuple[int, int]]:
    """native._runs as a plain loop over the items."""
    runs, start = [], 0
    while start < len(sizes):
        end, total = start, 0
        while end < len(sizes) and (end == start or total < limit):
            total += sizes[end]
            end += 1
        runs.append((start, end))
        start = end
    return runs


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=40), st.integers(1, 120))
def test_batch_runs_equal_a_plain_loop(sizes, limit):
    assert native._runs(np.array(sizes, dtype=np.int64), limit) == _runs_one_by_one(sizes, limit)


@needs_core
@pytest.mark.parametrize("limit", [1, 7, 300, 1 << 19])
def test_a_batch_in_many_calls_equals_one_call(monkeypatch, limit):
    """However batch() splits the texts into calls (str or UTF-8 given), each text's results are the same."""
    texts_ = golden_texts() + ["", "x", "中文字近似重复" * 50, "\ud800 lone"]
    utf8 = [text.encode("utf-8", "surrogatepass") for text in texts_]
    whole = _raw(texts_, scheme=DEFAULT_SCHEME)
    monkeypatch.setattr(native, "BATCH_BYTES", limit)
    for given_utf8 in (None, utf8):
        split = _raw(texts_, scheme=DEFAULT_SCHEME, utf8=given_utf8)
        assert all(np.array_equal(a, b) for a, b in zip(split, whole))


@needs_core
def test_threads_share_nothing():
    """Each thread has its own scratch memory: results under concurrency are the single-thread ones."""
    texts_ = golden_texts()
    expected = simhash_and_sketch_many(texts_)
    results, errors = [], []

    def work():
        try:
            for _ in range(3):
                results.append(simhash_and_sketch_many(texts_))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 12 and all(r == expected for r in results)


@needs_core
def test_the_switch(monkeypatch):
    monkeypatch.setenv(native.SWITCH, "python")
    assert native.core() is None and native.describe().startswith("python (numpy reference")
    monkeypatch.setenv(native.SWITCH, "native")
    assert native.core() is LIB and native.describe().startswith("native (C core")
    monkeypatch.setenv(native.SWITCH, "fast")
    with pytest.raises(native.NativeUnavailable, match="must be python, native or auto"):
        native.core()


def _package_copy(tmp_path: Path) -> Path:
    """The package's source copied without the compiled library: as an install without a compiler."""
    source = Path(native.__file__).resolve().parents[1]
    target = tmp_path / "site"
    shutil.copytree(
        source,
        target / "simhash_sqlite",
        ignore=shutil.ignore_patterns("*.so", "*.dylib", "*.dll", "_build.json", "__pycache__"),
    )
    if not (target / "simhash_sqlite" / "migrations").exists():  # a source checkout keeps them beside the package
        shutil.copytree(source.parent / "migrations", target / "simhash_sqlite" / "migrations")
    return target


@pytest.mark.parametrize("how", ["no library", "switch"])
def test_the_package_without_the_core(tmp_path, how):
    """Without the library (a copy of the package that lacks it) or with the switch, the package runs on
    the numpy path: the same fingerprints, an index made and searched through the CLI, and --version
    says why."""
    env = {k: v for k, v in os.environ.items() if k != native.SWITCH}
    if how == "no library":
        env["PYTHONPATH"] = str(_package_copy(tmp_path))
    else:
        env[native.SWITCH] = "python"
    text = "Near-duplicate detection finds texts that are almost the same, ＡＢＣ Straße."
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    script = (
        "import json, sys, simhash_sqlite.native as n; from simhash_sqlite.core.fingerprint import simhash; "
        "print(json.dumps([n.__file__, n.core() is None, n.describe(), simhash(sys.argv[1])]))"
    )
    run = subprocess.run([sys.executable, "-c", script, text], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    where, absent, describe, fingerprint = json.loads(run.stdout)
    assert absent and fingerprint == reference_simhash_many([text])[0]
    if how == "no library":
        assert where.startswith(str(tmp_path)) and "not built" in describe
    else:
        assert "SIMHASH_SQLITE_CORE=python" in describe
    cli = [sys.executable, "-m", "simhash_sqlite"]
    version = subprocess.run([*cli, "--version"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert "core: python (numpy reference" in version.stdout
    add = subprocess.run([*cli, "add", "--db", "x.db", "a.txt"], env=env, cwd=tmp_path, capture_output=True)
    assert add.returncode == 0, add.stderr
    near = subprocess.run([*cli, "near", "--db", "x.db", "--file", "a.txt"], env=env, cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert near.returncode == 0 and "a.txt" in near.stdout


@needs_core
def test_version_names_the_native_core(tmp_path):
    # From another folder: `python -m` puts the working folder first, and a checkout's package has no build
    version = subprocess.run([sys.executable, "-m", "simhash_sqlite", "--version"], capture_output=True, text=True,
                             cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != native.SWITCH})  # fmt: skip
    assert "core: native (C core" in version.stdout


def _wheel(tmp_path: Path, env_extra: dict) -> Path:
    """`pip wheel .` of this checkout (its build hook compiles the core when it can)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "hatch_build.py").exists():
        pytest.skip("not a source checkout")
    out = tmp_path / "wheel"
    env = {**os.environ, **env_extra}
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(root)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if run.returncode and "hatchling" in run.stderr and "No matching distribution" in run.stderr:
        pytest.skip("the build backend (hatchling) cannot be fetched here")
    assert run.returncode == 0, run.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="CC=/bin/false is a POSIX way to have no compiler")
def test_install_without_a_compiler(tmp_path):
    """`CC=/bin/false pip install .`: the build succeeds, the wheel is pure Python without the library and
    records why, and the package runs from it on the numpy path."""
    import zipfile

    wheel = _wheel(tmp_path, {"CC": "/bin/false"})
    assert wheel.name.endswith("-py3-none-any.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        z.extractall(site)
    assert not [n for n in names if n.endswith((".so", ".dylib", ".dll"))]
    report = json.loads((site / "simhash_sqlite" / "native" / "_build.json").read_text())
    # Both parts name the compiler (not a missing header, nor the command's own failure alone).
    for part in ("_simhash_core", "simhash"):
        assert report[part]["built"] is False, report[part]
        assert report[part]["reason"].startswith("no working C compiler (/bin/false"), report[part]
    env = {**{k: v for k, v in os.environ.items() if k != native.SWITCH}, "PYTHONPATH": str(site)}
    text = "Near-duplicate detection, ＡＢＣ Straße."
    script = "import sys; from simhash_sqlite.core.fingerprint import simhash; print(simhash(sys.argv[1]))"
    run = subprocess.run([sys.executable, "-c", script, text], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0 and int(run.stdout) == reference_simhash_many([text])[0], run.stderr
    version = subprocess.run([sys.executable, "-m", "simhash_sqlite", "--version"], env=env, cwd=tmp_path,
                             capture_output=True, text=True)  # fmt: skip
    assert "core: python (numpy reference: the C core is not built (no working C compiler (" in version.stdout


@needs_core
@pytest.mark.slow
def test_install_with_a_compiler(tmp_path):
    """`pip install .` with the system compiler: a platform wheel carrying the library, which loads."""
    import zipfile

    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler here")
    wheel = _wheel(tmp_path, {"CFLAGS": "-O0"})  # after the build's -O3: a quick build of the same sources
    assert not wheel.name.endswith("-none-any.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    assert (site / "simhash_sqlite" / "native" / native.library_path().name).exists()
    env = {**{k: v for k, v in os.environ.items() if k != native.SWITCH}, "PYTHONPATH": str(site)}
    version = subprocess.run([sys.executable, "-m", "simhash_sqlite", "--version"], env=env, cwd=tmp_path,
                             capture_output=True, text=True)  # fmt: skip
    assert "core: native (C core" in version.stdout, version.stdout + version.stderr


def test_a_wrong_switch_is_one_error_line(tmp_path):
    env = {**os.environ, native.SWITCH: "fast"}
    run = subprocess.run([sys.executable, "-m", "simhash_sqlite", "hash", "hello world"], env=env, cwd=tmp_path,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip() == "error: SIMHASH_SQLITE_CORE must be python, native or auto, not 'fast'"
    version = subprocess.run([sys.executable, "-m", "simhash_sqlite", "--version"], env=env, cwd=tmp_path,
                             capture_output=True, text=True)  # fmt: skip
    assert "core: none: SIMHASH_SQLITE_CORE must be python, native or auto" in version.stdout


def _lsh_rows(scheme: SketchScheme, n: int, seed: int) -> np.ndarray:
    """Random sketches, a third of them near copies of others (each bit of the bins kept with probability
    0.75-1, the size field kept), and some identical copies."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 256, (n, scheme.nbytes), dtype=np.uint8)
    near = n // 3
    keep = rng.uniform(0.75, 1.0, (near, 1))
    flips = rng.random((near, scheme.bin_bytes * 8)) >= keep
    rows[n - near :] = rows[:near]  # the size field too, where the scheme has one
    rows[n - near :, : scheme.bin_bytes] ^= np.packbits(flips, axis=1, bitorder="little")
    rows[rng.integers(0, n, n // 20)] = rows[rng.integers(0, n, n // 20)]
    return rows


def _pairs_of(parts) -> dict[tuple[int, int], bytes]:
    out: dict[tuple[int, int], bytes] = {}
    for a, b, estimate in parts:
        for pair, e in zip(zip(a.tolist(), b.tolist()), estimate.tolist()):
            assert pair[0] < pair[1] and pair not in out  # each pair once
            out[pair] = np.float64(e).tobytes()
    return out


@needs_core
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("threads", [1, 2])
def test_lsh_table_pairs_equal_the_reference(scheme, threads):
    """sketch_pairs' tables by the core (each pair at its first agreeing window, estimated as it is found)
    give the pairs and the estimates, bit for bit, that the reference's deduplicated codes give: narrow
    windows put random rows in large groups, and the thresholds run from everything to near copies."""
    from simhash_sqlite.find.sketch_pairs import _estimated, _windows, _words, candidate_codes, table_pairs

    rows = _lsh_rows(scheme, 600, scheme.bins)
    nbits = scheme.bins * scheme.bits
    words = _words(rows[:, : scheme.bin_bytes])
    for width, step in [(min(8, nbits), 3), (min(13, nbits), 5), (min(24, nbits), 12)]:
        if not _windows(nbits, width, step):
            continue
        codes = candidate_codes(words, nbits, width, step)
        for threshold in (0.0, 0.45, 0.8):
            expected = _pairs_of(_estimated(codes, len(rows), len(rows), rows, None, threshold, scheme))
            found = _pairs_of(table_pairs(LIB, rows, None, words, nbits, threshold, scheme, width, step, threads))
            assert found == expected, (width, step, threshold)


@needs_core
def test_lsh_table_pairs_resume_where_the_output_was_full():
    """A group of 300 rows sharing a key (44,850 pairs) written 7 pairs a call: the same pairs as at once."""
    from simhash_sqlite.find.sketch_pairs import _words, window_keys

    rng = np.random.default_rng(5)
    rows = rng.integers(0, 256, (400, DEFAULT_SCHEME.nbytes), dtype=np.uint8)
    rows[rng.permutation(400)[:300], :2] = 0  # the first 16 bits: one key for 300 rows
    words = _words(rows[:, : DEFAULT_SCHEME.bin_bytes])
    packed = np.sort((window_keys(words, 0, 16) << np.uint64(9)) | np.arange(400, dtype=np.uint64))
    whole = native.window_pairs(LIB, rows, packed, 9, 16, 8, 0, 0.0, DEFAULT_SCHEME)
    assert len(whole[0]) >= 300 * 299 // 2
    pieces = native.window_pairs(LIB, rows, packed, 9, 16, 8, 0, 0.0, DEFAULT_SCHEME, chunk=7)
    assert _pairs_of([whole]) == _pairs_of([pieces])
    a, b, estimate = whole
    assert estimate.tobytes() == reference_estimate_many(rows[a], rows[b]).tobytes()


@needs_core
@pytest.mark.parametrize("seed", range(4))
def test_sketch_pairs_with_copies_equal_the_reference(monkeypatch, seed):
    """Identical sketches are folded before the tables, so the core's tables see rows through `first`:
    sketch_pairs gives the same pairs and estimates with the core as with SIMHASH_SQLITE_CORE=python."""
    from simhash_sqlite.find.sketch_pairs import sketch_pairs

    rows = _lsh_rows(DEFAULT_SCHEME, 500, seed)
    found = {}
    for core in ("native", "python"):
        monkeypatch.setenv(native.SWITCH, core)
        pairs: dict[tuple[int, int], bytes] = {}
        for part in sketch_pairs(rows, 0.5, DEFAULT_SCHEME, width=10, step=4):
            for a, b, e in zip(part.left.tolist(), part.right.tolist(), part.estimate.tolist()):
                assert a < b and (a, b) not in pairs
                pairs[(a, b)] = np.float64(e).tobytes()
        found[core] = pairs
    assert found["native"] == found["python"] and len(found["native"]) > 100


@needs_core
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 5000), st.integers(0, 63), st.integers(1, 64), st.sampled_from(["rows", "shuffled", "any"]),
    st.booleans(), st.integers(0, 2**32 - 1),
)
def test_the_cores_sort_of_lsh_tables_is_numpys(n, low, width, layout, scratch, seed):
    """shc_sort_packed gives np.sort's words whatever they are: an LSH table's (keys over ascending rows, the
    stable pass alone), rows out of order under equal keys (the pass, then the in-place sort), any words;
    with scratch and without."""
    rng = np.random.default_rng(seed)
    width = min(width, 64 - low)
    keys = rng.integers(0, 2**63, n, dtype=np.uint64) >> np.uint64(64 - width) if width else np.zeros(n, np.uint64)
    if rng.integers(2):
        keys &= np.uint64(7)  # few keys: long runs of equal ones
    below = np.arange(n, dtype=np.uint64) & np.uint64((1 << low) - 1)
    if layout == "shuffled":
        rng.shuffle(below)
    words = (keys << np.uint64(low)) | below if low else keys
    if layout == "any":
        words = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True) >> np.uint64(int(rng.integers(64)))
    got = words.copy()
    native.sort_packed(LIB, got, low, np.full(n, 0xAB, dtype=np.uint64) if scratch else None)
    assert got.tobytes() == np.sort(words).tobytes()


@needs_core
@settings(max_examples=150, deadline=None)
@given(st.integers(1, 300), st.integers(1, 40), st.integers(1, 64), st.integers(0, 63), st.integers(0, 2**32 - 1))
def test_the_cores_table_words_are_numpys(n, nbytes, width, low, seed):
    """shc_pack_window gives sketch_pairs' (window_keys << low | low words) for every window of the rows' bits,
    the last word's too (no word after it: zeros)."""
    from simhash_sqlite.find.sketch_pairs import _words, window_keys

    rng = np.random.default_rng(seed)
    low = min(low, 64 - width)
    words = _words(rng.integers(0, 256, (n, nbytes), dtype=np.uint8))
    below = rng.integers(0, 2**63, n, dtype=np.uint64) & np.uint64((1 << low) - 1)
    for start in {0, int(rng.integers(0, nbytes * 8)), nbytes * 8 - 1, 63, 64}:
        if start < words.shape[0] * 64:
            expected = (window_keys(words, start, width) << np.uint64(low)) | below
            assert native.pack_window(LIB, words, start, width, low, below).tobytes() == expected.tobytes()
    with pytest.raises(ValueError, match="refused"):
        native.pack_window(LIB, words, 0, 65 - low, low, below)


@needs_core
def test_the_cores_sort_refuses_what_it_cannot_sort():
    words = np.arange(4, dtype=np.uint64)
    for bad in (words.astype(np.int64), words[::2], np.arange(4, dtype=np.uint64)[::-1]):
        with pytest.raises(ValueError):
            native.sort_packed(LIB, bad, 3)
    with pytest.raises(ValueError, match="scratch"):
        native.sort_packed(LIB, words, 3, np.empty(3, dtype=np.uint64))
    with pytest.raises(ValueError, match="refused"):
        native.sort_packed(LIB, words, 64)


@needs_core
def test_lsh_table_pairs_refuse_what_lies_beyond_the_rows():
    """A row past the rows given, words out of order, a window past the bins: an error from the core,
    never a read out of bounds (bench/native_sanitize.sh runs the core's harness under ASan)."""
    rows = np.zeros((4, DEFAULT_SCHEME.nbytes), dtype=np.uint8)
    packed = np.array([0, 1, 2, 3], dtype=np.uint64)  # key 0, rows 0-3: one group
    assert len(native.window_pairs(LIB, rows, packed, 3, 16, 8, 0, 0.0, DEFAULT_SCHEME)[0]) == 6
    for bad_packed, table in [
        (np.array([0, 1, 2, 7], dtype=np.uint64), 0),  # row 7 of 4
        (np.array([0, 2, 1, 3], dtype=np.uint64), 0),  # not sorted
        (np.array([0, 1, 1, 3], dtype=np.uint64), 0),  # a row twice
        (packed, 200),  # the window past the 944 bins
    ]:
        with pytest.raises(ValueError, match="refused the LSH table"):
            native.window_pairs(LIB, rows, bad_packed, 3, 16, 8, table, 0.0, DEFAULT_SCHEME)


@needs_core
@pytest.mark.slow  # a 4.4 M character text through the numpy reference: about 15 s
def test_a_text_of_more_n_grams_than_the_set_takes_is_sorted_to_the_same_numbers():
    """Above SORT_DISTINCT_ABOVE (2**22) n-grams the core finds the distinct hashes by sorting them in place
    (a huge query in the extension: issue 36 item 8), with the same fingerprint and sketch, and repeats."""
    rng = np.random.default_rng(3)
    words = ["".join(chr(97 + int(c)) for c in rng.integers(0, 16, int(n))) for n in rng.integers(2, 10, 4000)]
    text = " ".join(words[int(i)] for i in rng.integers(0, len(words), 800_000))  # about 4.4 M characters
    assert len(text) > (1 << 22) + 5
    for settings_ in (FingerprintSettings(), FingerprintSettings(weights="log")):
        got = _outcome(simhash_and_sketch_many, [text, text[:1000]], settings_, DEFAULT_SCHEME)
        assert got == _outcome(reference_simhash_and_sketch_many, [text, text[:1000]], settings_, DEFAULT_SCHEME)
    _, _, status = _raw([text], scheme=DEFAULT_SCHEME)
    assert not status[0] & native.DECLINED


@needs_core
@given(texts, st.sampled_from([1, 2, 3, 5, 7]))
def test_shingle_sets_equal_the_reference(text, n):
    """shingles.shingle_set's hashes in C (the exact check's sets: dedup's and dupes'), bit for bit those of
    the numpy path, for every plane's characters (and lone surrogates, which normalize keeps)."""
    from simhash_sqlite.core.features import distinct, ngram_hashes, normalize
    from simhash_sqlite.core.shingles import shingle_set

    normal = normalize(text)
    codes = np.frombuffer(normal.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    got = native.shingle_set(codes, n)
    assert got is not None and got.dtype == np.uint64
    assert np.array_equal(got, distinct(ngram_hashes(codes.astype(np.uint64), n)))
    assert np.array_equal(shingle_set(text, n), got if normal else np.empty(0, np.uint64))
