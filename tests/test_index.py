"""The index: adds, updates, interrupted adds, and search exactness against a brute-force scan."""

import random

import pytest
from conftest import integrity_ok
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_sqlite import Document, InvalidInput, SettingsMismatch, SimhashIndex, hamming
from simhash_sqlite.find.search import block_neighbours, near_sql, plan_for

MASK = (1 << 64) - 1


def brute_force(stored: dict, query: int, k: int, exclude=None):
    return sorted(
        ((hamming(fp, query), key) for key, fp in stored.items() if key != exclude and hamming(fp, query) <= k),
    )


def flip(fp: int, bits: list[int]) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


@st.composite
def clustered_fingerprints(draw):
    """A few centres (including all-zero and all-one) and variants at chosen distances."""
    centres = [0, MASK] + draw(st.lists(st.integers(0, MASK), min_size=1, max_size=4))
    fps = []
    for c in centres:
        fps.append(c)
        for _ in range(draw(st.integers(0, 8))):
            d = draw(st.integers(0, 20))
            fps.append(flip(c, draw(st.lists(st.integers(0, 63), min_size=d, max_size=d, unique=True))))
        # Differences confined to one 16-bit block: the case the pigeonhole argument hinges on.
        block = draw(st.integers(0, 3))
        bits = draw(st.lists(st.integers(16 * block, 16 * block + 15), min_size=1, max_size=16, unique=True))
        fps.append(flip(c, bits))
    return fps


@given(clustered_fingerprints(), st.integers(0, 64), st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_near_equals_brute_force_for_any_k(tmp_path_factory, fps, k, data):
    path = tmp_path_factory.mktemp("exact") / "i.db"
    stored = {f"d{i}": fp for i, fp in enumerate(fps)}
    with SimhashIndex(path, create=True) as index:
        index.add_fingerprints(stored.items())
        queries = [data.draw(st.sampled_from(fps)), data.draw(st.integers(0, MASK)), 0, MASK]
        for q in queries:
            got = [(m.distance, m.key) for m in index.near(fingerprint=q, k=k, check=False)]
            assert got == brute_force(stored, q, k), (k, q)


def test_distance_exactly_k_and_identical_fingerprints(index):
    base = 0x0123456789ABCDEF
    index.add_fingerprints(
        [("same1", base), ("same2", base), ("k3", flip(base, [0, 20, 40])), ("k4", flip(base, [0, 1, 2, 3]))]
    )
    assert [(m.key, m.distance) for m in index.near(fingerprint=base, k=3, check=False)] == [
        ("same1", 0), ("same2", 0), ("k3", 3)
    ]
    assert [m.key for m in index.near(fingerprint=base, k=4, check=False)] == ["same1", "same2", "k3", "k4"]
    # A key's own document is left out, its identical twin is not.
    assert [m.key for m in index.near(key="same1", k=0, check=False)] == ["same2"]


def test_all_zero_and_all_one_fingerprints(index):
    index.add_fingerprints([("zero", 0), ("one", MASK), ("top", 1 << 63)])
    assert [m.key for m in index.near(fingerprint=0, k=1, check=False)] == ["zero", "top"]
    assert [m.key for m in index.near(fingerprint=MASK, k=0, check=False)] == ["one"]
    assert [(m.key, m.distance) for m in index.near(fingerprint=MASK, k=64, check=False)] == [
        ("one", 0), ("top", 63), ("zero", 64)
    ]
    assert index.get("one").fingerprint == MASK


def test_block_neighbours_are_exactly_the_values_within_the_radius():
    for value in (0, 0xFFFF, 0x1234):
        for radius in range(4):
            got = set(block_neighbours(value, radius).tolist())
            assert got == {v for v in range(1 << 16) if bin(v ^ value).count("1") <= radius}


def test_plans():
    assert plan_for(3).kind == "blocks"
    assert plan_for(7).kind == "probes" and plan_for(7).probes_per_block == 17
    assert plan_for(64).kind == "scan"
    # (a bad k is refused at the library's entries, SimhashIndex.plan among them: test_cli.py's bad-k test)


def test_add_is_idempotent_and_updates_changed_documents(index):
    report = index.add([Document("a", "first text here"), Document("b", "second text here")])
    assert (report.added, report.updated, report.unchanged) == (2, 0, 0)
    report = index.add([Document("a", "first text here"), Document("b", "second text, changed")])
    assert (report.added, report.updated, report.unchanged) == (0, 1, 1)
    assert len(index) == 2
    assert index.get("b").fingerprint == index.fingerprint("second text, changed")


def test_duplicate_keys_in_one_batch_keep_the_last(index):
    report = index.add([Document("a", "one version"), Document("a", "another version")])
    assert len(index) == 1 and report.added == 1 and report.updated == 1
    assert index.get("a").fingerprint == index.fingerprint("another version")


def test_featureless_documents_are_stored_but_never_match(index):
    index.add([Document("empty1", ""), Document("empty2", "   "), Document("punct", "!!!"), Document("x", "real text")])
    assert len(index) == 4
    assert index.get("empty1").fingerprint is None
    assert [m.key for m in index.near(fingerprint=0, k=64, check=False)] == ["x"]
    with pytest.raises(InvalidInput):
        index.near("", k=3, check=False)
    with pytest.raises(InvalidInput):
        index.near(key="empty1", k=3, check=False)


def test_texts_are_stored_only_when_asked(tmp_path):
    with SimhashIndex(tmp_path / "a.db", create=True) as index:
        index.add([Document("a", "some text")])
        assert index.get("a").text is None
    with SimhashIndex(tmp_path / "b.db", create=True, store_text=True) as index:
        index.add([Document("a", "some text")])
        assert index.get("a").text == "some text"


def test_settings_are_recorded_and_enforced(tmp_path):
    path = tmp_path / "w.db"
    with SimhashIndex(path, create=True, features="words", ngram=2) as index:
        index.add([Document("a", "我们喜欢编程 and python")])
    with SimhashIndex(path) as index:  # reopened without options: recorded settings apply
        assert (index.settings.features, index.settings.ngram) == ("words", 2)
        assert [m.key for m in index.near("我们喜欢编程 and python", k=0, check=False)] == ["a"]
    with pytest.raises(SettingsMismatch):
        SimhashIndex(path, ngram=3)
    with pytest.raises(SettingsMismatch):
        SimhashIndex(path, features="chars")
    with SimhashIndex(path, features="words", ngram=2):  # the same values are fine
        pass


def test_sql_functions_work_in_raw_sql(index):
    index.add([Document("a", "hello world"), Document("b", "something else entirely")])
    fp = index.fingerprint("hello world")
    rows = index.conn.execute(
        "SELECT key, hamming(fingerprint, simhash(?)) AS d FROM documents WHERE b0 = ? ORDER BY d",
        ("hello world", fp >> 48),
    ).fetchall()
    assert rows == [("a", 0)]
    assert index.conn.execute("SELECT hamming(-1, 0), hamming(NULL, 1), simhash('')").get == (64, None, None)
    with pytest.raises(Exception, match="hamming"):
        index.conn.execute("SELECT hamming('a', 1)").get


def test_interrupted_add_keeps_every_committed_batch(db_path):
    def documents():
        for i in range(2500):
            if i == 2345:
                raise KeyboardInterrupt
            yield Document(f"doc{i}", f"text number {i} " + "filler " * (i % 7))

    with SimhashIndex(db_path, create=True) as index:
        with pytest.raises(KeyboardInterrupt):
            index.add(documents(), batch_size=1000)
        assert len(index) == 2000  # two whole batches, nothing of the third
    assert integrity_ok(db_path)
    with SimhashIndex(db_path) as index:
        report = index.add((Document(f"doc{i}", f"text number {i} " + "filler " * (i % 7)) for i in range(2500)))
        assert (report.unchanged, report.added, len(index)) == (2000, 500, 2500)


def test_near_duplicates_of_real_text_are_found(index):
    rng = random.Random(3)

    def text():
        return " ".join("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(400))

    original = text()
    edited = original[:1000] + "changed" + original[1007:]
    index.add([Document("original", original), Document("unrelated", text())])
    found = index.near(edited, k=8, check=False)
    assert [m.key for m in found] == ["original"]
    assert near_sql(plan_for(3)).count("UNION") == 3
    assert index.near_sql(3) == near_sql(index.plan(3))
