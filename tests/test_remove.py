"""Removing documents: by key, by GLOB, from a list, pruning files that are gone, and vacuum."""

import json
import os

from conftest import integrity_ok
from test_cli import assert_clean_error, simq

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.pipeline.sources import _glob_regex, stale_keys
from simhash_sqlite.store.integrity import problems


def test_remove_by_key_glob_and_vacuum(index, db_path):
    index.add(
        [Document(f"docs/{i}.txt", f"text number {i} " * 50) for i in range(300)] + [Document("keep", "other text")]
    )
    assert index.remove(["docs/1.txt", "docs/2.txt", "not there"]) == 2
    assert index.remove([]) == 0
    assert index.get("docs/1.txt") is None and index.get("docs/3.txt") is not None
    removed = index.remove_glob("docs/1?.txt")
    assert removed == [f"docs/1{i}.txt" for i in range(10)]
    assert len(index.remove_glob("docs/*")) == 300 - 12
    assert list(index.keys()) == ["keep"]
    before, after = index.vacuum()
    assert after < before
    assert [m.key for m in index.near("other text", k=0, check=False)] == ["keep"]
    assert problems(db_path) == []


def test_keys_with_a_prefix_use_plain_string_order(index):
    index.add([Document(k, "some words here") for k in ("a/b", "a/c/d", "a0", "a", "b/a", "a/\U0001f600")])
    assert list(index.keys("a/")) == ["a/b", "a/c/d", "a/\U0001f600"]
    assert list(index.keys("")) == sorted(["a/b", "a/c/d", "a0", "a", "b/a", "a/\U0001f600"])


def test_cli_rm_by_keys_glob_and_list(runner, db_path, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"k{i}", "text": f"text {i} here"}) + "\n" for i in range(20)))
    assert simq(runner, "add", "--db", db_path, data).exit_code == 0
    result = simq(runner, "rm", "--db", db_path, "k0", "k1", "nope")
    assert result.exit_code == 0 and "2 removed, 1 key not in the index" in result.stdout
    listing = tmp_path / "keys.txt"
    listing.write_text("k2\nk3\n\n")
    assert "2 removed" in simq(runner, "rm", "--db", db_path, "--from", listing).stdout
    assert "1 removed" in simq(runner, "rm", "--db", db_path, "--from", "-", input="k4\n").stdout
    assert "10 removed" in simq(runner, "rm", "--db", db_path, "--glob", "k1?").stdout
    assert json.loads(simq(runner, "stats", "--db", db_path, "--json").stdout)["documents"] == 5
    assert "bytes" in simq(runner, "vacuum", "--db", db_path).stdout
    assert_clean_error(simq(runner, "rm", "--db", db_path), "give keys", 2)
    assert_clean_error(simq(runner, "rm", "--db", tmp_path / "absent.db", "k"), "no index at")
    assert_clean_error(simq(runner, "rm", "--db", db_path, "--from", tmp_path / "nofile"), "No such file")
    assert integrity_ok(db_path)


def test_prune_removes_only_gone_files_under_the_inputs(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("docs/a.txt", "docs/sub/b.txt", "docs/sub/c.md", "other/d.txt"):
        os.makedirs(os.path.dirname(name), exist_ok=True)
        with open(name, "w") as handle:
            handle.write(f"the text of {name} " * 20)
    db = tmp_path / "i.db"
    assert simq(runner, "add", "--db", db, "docs", "other").exit_code == 0
    os.remove("docs/sub/b.txt")
    os.remove("docs/sub/c.md")
    os.remove("other/d.txt")
    # A glob prunes only what it matches: *.txt in docs/sub, not the .md file, not other/.
    result = simq(runner, "add", "--db", db, "--prune", "docs/**/*.txt")
    assert result.exit_code == 0 and "1 pruned" in result.stdout and "docs/sub/b.txt" in result.stderr
    # A folder prunes everything gone below it, and nothing outside it.
    result = simq(runner, "add", "--db", db, "--prune", "docs")
    assert "1 pruned" in result.stdout
    with SimhashIndex(db) as index:
        assert sorted(index.keys()) == ["docs/a.txt", "other/d.txt"]
        # A file named one by one is never pruned; neither are JSONL ids outside the folders.
        index.add([Document("an-id", "jsonl text")])
        assert stale_keys(index, ["docs/a.txt", "data.jsonl", "-"]) == []
        assert stale_keys(index, ["other"]) == ["other/d.txt"]
    assert integrity_ok(db)


def test_glob_regex_follows_glob_rules():
    assert _glob_regex("docs/*.txt").fullmatch("docs/a.txt")
    assert not _glob_regex("docs/*.txt").fullmatch("docs/s/a.txt")
    assert _glob_regex("docs/**/*.txt").fullmatch("docs/a.txt")
    assert _glob_regex("docs/**/*.txt").fullmatch("docs/s/t/a.txt")
    assert _glob_regex("d/[!a]b?").fullmatch("d/xbz") and not _glob_regex("d/[!a]b?").fullmatch("d/abz")
    assert _glob_regex("d/a+b(1).txt").fullmatch("d/a+b(1).txt")
