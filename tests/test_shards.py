"""near_in_shards over index files split by shard_of, without Spark: the same answer as one index
holding every document, with the check and without it."""

import random

import pytest

from simhash_sqlite import Document, InvalidInput, SettingsMismatch, SimhashIndex, near_in_shards
from simhash_sqlite.pipeline.shards import SHARD_PATTERN, shard_of, shard_paths

WORDS = "river stone lantern harbour meadow copper violet signal orchard thunder marble quiet".split()


def _corpus(n: int, seed: int) -> list[Document]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        base = " ".join(rng.choice(WORDS) for _ in range(120))
        docs.append(Document(f"doc{i}", base))
        if i % 3 == 0:  # a lightly edited copy, so that there are near-duplicates across shards
            words = base.split()
            words[rng.randrange(len(words))] = "changed"
            docs.append(Document(f"doc{i}-copy", " ".join(words)))
    return docs


@pytest.fixture
def split(tmp_path):
    docs = _corpus(60, seed=7)
    shards = 3
    for shard in range(shards):
        with SimhashIndex(tmp_path / SHARD_PATTERN.format(shard), create=True, store_text=True) as index:
            index.add(d for d in docs if shard_of(d.key, shards) == shard)
    with SimhashIndex(tmp_path / "whole.db", create=True, store_text=True) as whole:
        whole.add(docs)
    return tmp_path, docs


@pytest.mark.parametrize("check", [True, False])
def test_shards_answer_as_one_index(split, check):
    folder, docs = split
    paths = shard_paths(folder)
    assert len(paths) == 3 and all(p.endswith(".db") for p in paths)
    with SimhashIndex(folder / "whole.db") as whole:
        for doc in docs[::7]:
            expected = whole.near(doc.text, check=check)
            found = near_in_shards(paths, doc.text, check=check)
            assert [(m.key, m.distance, m.jaccard, m.checked_by) for m in found] == [
                (m.key, m.distance, m.jaccard, m.checked_by) for m in expected
            ]
            assert any(m.key == doc.key for m in found)
            by_fingerprint = near_in_shards(paths, fingerprint=whole.fingerprint(doc.text), k=3, check=False)
            assert [m.key for m in by_fingerprint] == [m.key for m in whole.near(doc.text, k=3, check=False)]
            assert near_in_shards(paths, doc.text, limit=1, check=check) == expected[:1]


def test_shards_refuse_what_they_cannot_answer(split, tmp_path):
    folder, _ = split
    paths = shard_paths(folder)
    with pytest.raises(InvalidInput, match="exactly one"):
        near_in_shards(paths)
    with pytest.raises(InvalidInput, match="no features"):
        near_in_shards(paths, "...")
    with pytest.raises(InvalidInput, match="no shard files"):
        shard_paths(tmp_path / "empty")
    with SimhashIndex(folder / SHARD_PATTERN.format(3), create=True, ngram=3) as other:
        other.add([Document("x", "river stone lantern")])
    with pytest.raises(SettingsMismatch):
        near_in_shards(shard_paths(folder), "river stone lantern harbour")
