"""The command line's faults found by an audit (issue 36 items 3-7), each through the real CLI: the
damaged file named rightly, no traceback for a bad port or an early Ctrl-C, options checked as their
help says, searches that never write, and keys that do not depend on the folder simq runs in."""

from __future__ import annotations

import os
import random

from test_cli import ENGLISH, assert_clean_error, simq

from simhash_sqlite import Document, SimhashIndex

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi".split()


def _damaged(tmp_path, documents=600):
    """An index whose data pages in the middle hold random bytes (its schema page is intact)."""
    path = tmp_path / "damaged.db"
    rnd = random.Random(0)
    with SimhashIndex(path, create=True) as index:
        index.add(Document(f"doc{i}", " ".join(rnd.choice(WORDS) for _ in range(60))) for i in range(documents))
    middle = os.path.getsize(path) // 4096 // 2
    with open(path, "r+b") as handle:
        for page in range(middle, middle + 3):
            handle.seek(page * 4096)
            handle.write(random.Random(page).randbytes(4096))
    return path


def test_a_damaged_index_is_named_not_the_query_file(runner, tmp_path):
    path = _damaged(tmp_path)
    query = tmp_path / "query.txt"
    query.write_text(" ".join(WORDS * 4))
    result = simq(runner, "near", "--file", query, "--db", path, "-k", "20")
    assert_clean_error(result, f"{path} is damaged")
    assert str(query) not in result.stderr
    assert f"sqlite3 {path} .dump" in result.stderr
