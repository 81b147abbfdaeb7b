"""One owner of the rule (issue 33): core/rule.py holds its numbers, the build generates the loadable
extension's _rule_constants.h from it, and one table of cases runs through Python's rule
(find/verdict.judge) and the extension's (simhash_test_rule, the function near_filter calls). The
extension's exact Jaccard is of features.normalize(text), every code point included."""

from __future__ import annotations

import ctypes
import json
import math
import re
import sys
import unicodedata
from pathlib import Path

import apsw
import pytest
from test_extension import EXTENSION, WHY_NOT, extension_connection

from simhash_sqlite import Document, SimhashIndex, to_signed
from simhash_sqlite.core import rule, settings, short_texts, sketch
from simhash_sqlite.core.features import normalize
from simhash_sqlite.core.fingerprint import reference_simhash_many
from simhash_sqlite.core.shingles import jaccard
from simhash_sqlite.find import search, verdict
from simhash_sqlite.native import gen_rule_constants
from simhash_sqlite.store import texts
from simhash_sqlite.store.functions import rule_values, version_info

needs_extension = pytest.mark.skipif(EXTENSION is None, reason=WHY_NOT)
RULE_PY = Path(rule.__file__)


# -- the numbers: one source -----------------------------------------------------------------------------

def test_the_generated_header_is_rule_py(tmp_path):
    values = gen_rule_constants.constants(RULE_PY.read_text(encoding="utf-8"))
    assert values == rule_values() and len(values) >= 26
    out = tmp_path / "_rule_constants.h"
    gen_rule_constants.main([str(RULE_PY), str(out)])
    defines = dict(re.findall(r"^#define (\w+) (.+)$", out.read_text(), re.M))
    for name, value in values.items():
        written = defines[name]
        if isinstance(value, str):
            assert json.loads(written) == value  # a C string of printable ASCII reads as JSON does
        else:
            assert type(eval(written.rstrip(")").lstrip("(").removesuffix("LL"))) is type(value)  # noqa: S307
            assert eval(written.strip("()").removesuffix("LL")) == value  # noqa: S307
    assert json.loads(json.loads(defines["RULE_JSON"])) == values
    assert json.loads(defines["RULE_DIGEST"]) == gen_rule_constants.digest(values)


def test_the_modules_take_their_numbers_from_rule_py():
    """The names stay importable where they were, and are rule.py's values (not copies)."""
    assert (settings.CONFIRM_K, settings.RECOMMENDED_K, settings.DEFAULT_THRESHOLD) == (
        rule.CONFIRM_K, rule.RECOMMENDED_K, rule.DEFAULT_THRESHOLD)
    assert verdict.CERTAIN == rule.CERTAIN and texts.READ_WHOLE_BYTES == rule.READ_WHOLE_BYTES == 32 << 20
    assert (sketch.SPREAD_FACTOR, sketch.RATIO_SLACK) == (rule.SPREAD_FACTOR, rule.RATIO_SLACK)
    assert short_texts.SHORT_TEXT_READ_MOST == 2 * short_texts.SHORT_TEXT_MOST == rule.SHORT_TEXT_READ_MOST
    assert search.PROBE_SEEK_NS == rule.PROBE_SEEK_NS and search.SCAN_LOAD_ROW_NS == rule.SCAN_LOAD_ROW_NS
    default = settings.FingerprintSettings()
    assert (default.ngram, default.weights, settings.HASH_SCHEME) == (
        rule.DEFAULT_NGRAM, rule.DEFAULT_WEIGHTS, rule.HASH_SCHEME)
    scheme = sketch.DEFAULT_SCHEME
    assert (scheme.bins, scheme.bits, scheme.size_bits, scheme.version) == (
        rule.DEFAULT_SKETCH_BINS, rule.DEFAULT_SKETCH_BITS, rule.DEFAULT_SKETCH_SIZE_BITS, rule.SKETCH_VERSION)
    assert (sketch.SKETCH_VERSION, sketch.MAX_BINS) == (rule.SKETCH_VERSION, rule.MAX_BINS) == (2, 1 << 16)


@pytest.mark.parametrize("line", ["from os import path", "X = 2 * 3", "lower = 1", "X = [1]", "X = True", "f()"])
def test_rule_py_must_stay_plain(line):
    with pytest.raises(ValueError, match="rule.py line 2"):
        gen_rule_constants.constants(f'"""doc"""\n{line}\n')


@needs_extension
def test_the_built_extension_carries_rule_py_and_says_its_build():
    """simhash_version() gives the same keys on both sides, and the extension's rule is rule.py's."""
    conn = extension_connection(":memory:")
    built = json.loads(conn.execute("SELECT simhash_version()").get)
    package = version_info(apsw.sqlite_lib_version())
    assert set(built) == set(package)
    assert built["rule"] == package["rule"] == rule_values()
    assert built["rule_digest"] == package["rule_digest"] == gen_rule_constants.digest(rule_values())
    assert built["unicode"] == unicodedata.unidata_version and built["sqlite"] == apsw.sqlite_lib_version()
    assert built["package"] == package["package"] and built["kernels"] in ("portable", "avx2", "avx512")


# -- one table of cases through both rules ------------------------------------------------------------------

F = rule.FILTER_CERTAIN
# (distance, k, estimate, certainty, exact Jaccard or None: a text out of reach) -> (keeps, checked_by)
CASES = [
    ((5, 12, None, None, None), (True, "distance")),  # nothing but the distance: within min(k, 9)
    ((9, 12, None, None, None), (True, "distance")),
    ((10, 12, None, None, None), (False, "distance")),
    ((7, 6, None, None, None), (False, "distance")),  # min(k, RECOMMENDED_K) = 6
    ((40, 64, None, None, 1.0), (True, "exact")),  # texts at hand: the distance does not matter
    ((3, 12, None, None, 0.79), (False, "exact")),
    ((3, 12, None, None, 0.8), (True, "exact")),
    ((3, 12, 0.5, F, 0.95), (False, "estimated")),  # (1) the filter, even where texts would keep it
    ((3, 12, 0.799, 1.0, 0.9), (False, "estimated")),
    ((3, 12, 0.5, math.nextafter(F, 0), 0.95), (True, "exact")),  # just short of the filter: (2) exact
    ((3, 12, 0.8, 1.0, 0.7), (False, "exact")),  # not below the threshold: no filter
    ((3, 12, 0.97, 0.999999999, 0.7), (False, "exact")),  # a sure estimate never overrides the texts
    ((3, 12, 0.97, 0.999999999, 0.85), (True, "exact")),
    ((3, 12, 0.97, 0.999999999, None), (True, "estimated")),  # (3) no texts: the estimate decides
    ((3, 12, 0.82, 0.6, None), (True, "estimated")),
    ((3, 12, 0.7, 0.99, None), (False, "estimated")),
    ((3, 12, 0.5, F, None), (False, "estimated")),
    ((30, 12, 0.85, 0.9, None), (True, "estimated")),  # the estimate, not the distance
]
CHECKED_BY = {1: "exact", 2: "estimated", 3: "distance"}


def python_rule(distance, k, estimate, sure, exact):
    v = verdict.judge(distance, estimate=estimate, sure=sure, exact=lambda: exact, k=k)
    return (v.keeps, v.checked_by), v.jaccard, v.certainty


def c_rule(distance, k, estimate, sure, exact):
    library = ctypes.CDLL(EXTENSION)
    function = library.simhash_test_rule
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_int,
                         ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
    j, c = ctypes.c_double(), ctypes.c_double()
    got = function(distance, k, estimate is not None, estimate or 0.0, math.nan if sure is None else sure,
                   exact is not None, exact or 0.0, ctypes.byref(j), ctypes.byref(c))
    none = lambda x: None if math.isnan(x) else x  # noqa: E731
    return (bool(got & 1), CHECKED_BY[got >> 1]), none(j.value), none(c.value)


@pytest.mark.parametrize("case, expected", CASES)
def test_the_table_of_cases_through_pythons_rule(case, expected):
    got, j, certainty = python_rule(*case)
    assert got == expected
    distance, k, estimate, sure, exact = case
    assert (j, certainty) == {"exact": (exact, 1.0), "estimated": (estimate, sure), "distance": (None, None)}[got[1]]


@needs_extension
@pytest.mark.parametrize("case, expected", CASES)
def test_the_table_of_cases_through_the_extensions_rule(case, expected):
    assert c_rule(*case) == python_rule(*case)
    assert c_rule(*case)[0] == expected


# -- the exact Jaccard of normalize(text), every code point ---------------------------------------------

CONTEXTS = ("{}", "e{}\u0301", "{}\u0323\u0301", "\u1100{}", "A{}B")


def _documents(per: int = 2048) -> dict[str, str]:
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and c]
    out = {}
    for start in range(0, len(points), per):
        chunk = points[start : start + per]
        out[f"cp{start:07}"] = " ".join(form.format(chr(c)) for c in chunk for form in CONTEXTS)
    return out


@needs_extension
@pytest.mark.slow  # every code point, five ways: about 10 s of CPU
def test_the_extensions_jaccard_is_of_the_normalized_text_for_every_code_point(tmp_path):
    """Each stored text holds 2,048 code points in five contexts (alone, between a letter and a mark it may
    compose with, before marks out of order, after a jamo, between letters); the query is its Python
    normalize() (which is not quite idempotent: a case fold may undo NFKC): the extension finds the stored
    text and its exact Jaccard is core/shingles.jaccard's, no text refused. Each query searches at the distance
    of its own stored text (the extension's simhash and hamming): that text is a candidate, as at k = 64, without
    every other text of the index being one too (they were 540 candidates a query, three quarters of the CPU)."""
    stored = _documents()
    path = tmp_path / "all.db"
    with SimhashIndex(path, create=True, store_text=True) as index:
        index.add(Document(key, text) for key, text in stored.items())
    conn = extension_connection(path)
    # the extension's fingerprint of each (a tenth, against the numpy reference): computed, never refused
    sample = list(stored.values())[::10]
    got = [conn.execute("SELECT simhash(?)", (text,)).get for text in sample]
    assert got == [None if fp is None else to_signed(fp) for fp in reference_simhash_many(sample)]
    distance = "SELECT hamming(simhash(?), fingerprint) FROM documents WHERE key = ?"
    for key, text in stored.items():
        query = normalize(text)
        k = conn.execute(distance, (query, key)).get
        found = conn.execute("SELECT key, jaccard, checked_by FROM simhash_near(?, ?) WHERE key = ?", (query, k, key))
        rows = list(found)
        assert rows == [(key, jaccard(query, text), "exact")], key


# -- one validation of the recorded settings ----------------------------------------------------------------

GOOD_FINGERPRINT = ('{"features": "chars", "hash": "blake2b64+splitmix64", "hmm": false, "ngram": 5, "version": 1, '
                    '"weights": "binary"}')
GOOD_SKETCH = '{"bins": 944, "bits": 1, "ngram": 5, "size_bits": 16, "version": 2}'
# (key, value): refused (True) or taken (False), by store/meta.py and by the extension alike
SETTINGS = [
    ("sketch", GOOD_SKETCH.replace('"ngram": 5', '"ngram": 0'), True, True),
    ("sketch", GOOD_SKETCH.replace('"version": 2', '"version": 3'), True, True),
    ("sketch", GOOD_SKETCH.replace('"bins": 944', '"bins": 65537'), True, True),
    ("sketch", GOOD_SKETCH.replace('"bits": 1', '"bits": 3'), True, True),
    ("sketch", GOOD_SKETCH.replace('"bits": 1', '"bits": true'), True, False),
    ("sketch", GOOD_SKETCH.replace('"size_bits": 16', '"size_bits": 8'), True, True),
    ("sketch", GOOD_SKETCH.replace('"size_bits": 16', '"colour": 16'), True, False),
    ("sketch", '{"bins": 944}', True, False),
    ("sketch", '{"bins": 960, "bits": 1}', False, False),  # version 1, as older indexes record it
    ("store_text", "yes", True, True),
    ("store_text", "", True, True),
    ("store_text", "1", False, False),
    ("short_texts", '{"bytes": 352, "format": 99}', True, True),
    ("short_texts", '{"bytes": 352, "format": 1.0}', True, False),
    ("short_texts", '{"bytes": 0, "format": 1}', True, True),
    ("short_texts", '{"format": 1}', True, False),
    ("short_texts", '{"bytes": 352, "format": 1, "from_id": -1}', True, False),
    ("short_texts", '{"bytes": 352, "format": 1, "extra": 1}', True, True),
    ("short_texts", "[]", True, True),
    ("short_texts", '{"bytes": 352, "format": 1, "from_id": 7}', False, False),
    ("fingerprint", GOOD_FINGERPRINT.replace('"hmm": false', '"hmm": 0'), True, False),
    ("fingerprint", GOOD_FINGERPRINT.replace('"ngram": 5', '"ngram": 5.0'), True, False),
    ("fingerprint", GOOD_FINGERPRINT.replace('"version": 1', '"version": 1.0'), False, False),  # Python: 1.0 == 1
    ("fingerprint", GOOD_FINGERPRINT.replace('"hmm": false', '"hmm": true'), False, False),
]


@needs_extension
@pytest.mark.parametrize("key, value, refused, same_words", SETTINGS)
def test_the_extension_refuses_the_files_simq_refuses(tmp_path, key, value, refused, same_words):
    from simhash_sqlite.errors import InvalidMetadata
    from simhash_sqlite.store.meta import meta_problems

    path = tmp_path / "meta.db"
    with SimhashIndex(path, create=True) as index:
        index.add([Document("a", "the quick brown fox jumps over the lazy dog")])
    raw = apsw.Connection(str(path))
    raw.execute("INSERT OR REPLACE INTO simhash_meta (key, value) VALUES (?, ?)", (key, value))
    raw.close()
    assert bool(meta_problems({key: value})) == refused
    if refused:
        with pytest.raises(InvalidMetadata, match=f"simhash_meta '{key}' is not valid"):
            SimhashIndex(path, readonly=True)
    else:
        SimhashIndex(path, readonly=True).close()
    conn = extension_connection(path)
    for sql in ("SELECT simhash('the quick brown fox')", "SELECT count(*) FROM simhash_near('the quick brown fox', 12)",
                "SELECT count(*) FROM simhash_near(7, 3)"):
        if refused:
            with pytest.raises(apsw.SQLError, match=f"simhash_meta '{key}' is not valid") as raised:
                conn.execute(sql).get
            if same_words:  # (where Python shows a value's repr or an exception's text, the words differ)
                assert f"({meta_problems({key: value})[0][1]});" in str(raised.value)
        else:
            conn.execute(sql).get


# -- integer arguments bound as REAL (a JavaScript number) ---------------------------------------------------

@needs_extension
def test_a_real_that_is_a_whole_number_is_taken_for_k_checked_and_a_block(tmp_path):
    path = tmp_path / "real.db"
    texts_ = {"a": "the quick brown fox jumps over the lazy dog", "b": "the quick brown fox jumps over the lazy cat"}
    with SimhashIndex(path, create=True) as index:
        index.add(Document(key, text) for key, text in texts_.items())
        package = index.conn
        ext = extension_connection(path)
        near = "SELECT key, distance, jaccard, checked_by FROM simhash_near(?, ?, ?) ORDER BY key"
        for conn in (package, ext):
            whole = list(conn.execute(near, (texts_["a"], 12, 1)))
            assert whole and list(conn.execute(near, (texts_["a"], 12.0, 1.0))) == whole
            assert conn.execute("SELECT simhash_block(-1, 2.0)").get == 65535
            for bad in ("SELECT * FROM simhash_near('x', 7.5)", "SELECT * FROM simhash_near('x', 7, 0.5)",
                        "SELECT simhash_block(-1, 2.5)", "SELECT * FROM simhash_near('x', 1e300)",
                        "SELECT hamming(1.0, 2)"):  # a fingerprint is never a REAL: 53 bits
                with pytest.raises((apsw.SQLError, Exception)):
                    conn.execute(bad).get


if __name__ == "__main__":  # (a quick look: python tests/test_extension_rule.py)
    sys.exit(pytest.main([__file__, "-q"]))
