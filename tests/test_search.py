"""Search plans, batches and bulk loads: every plan equals a brute-force scan, for any k."""

import json

import apsw
import pytest
from conftest import integrity_ok
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import assert_clean_error, simq
from test_index import MASK, brute_force, clustered_fingerprints, flip

from simhash_sqlite import FailedQuery, InvalidInput, Query, SimhashIndex
from simhash_sqlite.find.search import plan_for


@given(clustered_fingerprints(), st.integers(0, 64), st.data())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_scan_index_and_batch_equal_brute_force_for_any_k(tmp_path_factory, fps, k, data):
    path = tmp_path_factory.mktemp("plans") / "i.db"
    stored = {f"d{i}": fp for i, fp in enumerate(fps)}
    queries = [data.draw(st.sampled_from(fps)), data.draw(st.integers(0, MASK)), 0, MASK, 1 << 63, (1 << 63) - 1]
    with SimhashIndex(path, create=True) as index:
        index.add_fingerprints(stored.items())
        for q in queries:
            want = brute_force(stored, q, k)
            for plan in ("scan", "index", None):
                got = [(m.distance, m.key) for m in index.near(fingerprint=q, k=k, plan=plan, check=False)]
                assert got == want, (plan, k, q)
        for plan in ("scan", "index", None):
            answers = list(index.near_many(queries, k=k, plan=plan, check=False))
            assert [[(m.distance, m.key) for m in a.matches] for _, a in answers] == [
                brute_force(stored, q, k) for q in queries
            ]


def test_explain_counts_candidates_and_names_the_plan(index):
    base = 0x0123456789ABCDEF
    index.add_fingerprints(
        [("a", base), ("b", flip(base, [0])), ("c", flip(base, [63, 47, 31, 15])), ("far", ~base & MASK)]
    )
    result = index.search(fingerprint=base, k=3, plan="index", check=False)
    # a shares all four blocks with the query, b three (bit 0 is in b3); c differs in one bit of every block.
    assert result.plan.kind == "blocks" and result.candidates == 7
    assert [m.key for m in result.matches] == ["a", "b"]
    scan = index.search(fingerprint=base, k=4, plan="scan", check=False)
    assert scan.plan.kind == "scan" and scan.candidates == 4
    assert [m.key for m in scan.matches] == ["a", "b", "c"]
    probes = index.search(fingerprint=base, k=7, plan="index", check=False)
    assert probes.plan.kind == "probes" and probes.plan.probes_per_block == 17
    assert probes.candidates == 12 and [m.key for m in probes.matches] == ["a", "b", "c"]
    with pytest.raises(InvalidInput, match="plan must be"):
        index.near(fingerprint=base, k=3, plan="fast", check=False)


def test_scan_sees_changes_from_this_and_other_connections(db_path):
    with SimhashIndex(db_path, create=True) as index:
        index.add_fingerprints([("a", 0)])
        assert [m.key for m in index.near(fingerprint=0, k=64, plan="scan", check=False)] == ["a"]
        index.add_fingerprints([("b", MASK)])  # this connection's change
        assert [m.key for m in index.near(fingerprint=0, k=64, plan="scan", check=False)] == ["a", "b"]
        with SimhashIndex(db_path) as other:  # another connection's commit
            other.add_fingerprints([("c", 1)])
            other.conn.execute("DELETE FROM documents WHERE key = 'a'")
        assert [m.key for m in index.near(fingerprint=0, k=64, plan="scan", check=False)] == ["c", "b"]


def test_hot_buckets_are_planned_with_block_counts(index):
    hot = 0xAAAA_BBBB_CCCC_DDDD
    index.add_fingerprints([(f"hot{i}", hot ^ (i << 20)) for i in range(3000)] + [("cold", 0x1234_5678_9ABC_DEF0)])
    assert index.plan(3, hot).kind == "blocks"  # no counts yet: the planner assumes uniform blocks
    index._searcher.load_block_counts()
    assert index.plan(3, hot).kind == "scan"  # 3000 rows share b0 and b3 with it: a scan is cheaper
    assert index.plan(3, 0x1234_5678_9ABC_DEF0).kind == "blocks"
    stored = dict((m.key, m.fingerprint) for m in index.near(fingerprint=hot, k=64, check=False))
    assert [(m.distance, m.key) for m in index.near(fingerprint=hot, k=3, check=False)] == brute_force(stored, hot, 3)


def test_a_batch_counts_blocks_once_it_meets_a_hot_bucket(index):
    hot = 0xAAAA_BBBB_CCCC_DDDD
    index.add_fingerprints([(f"hot{i}", hot ^ (i << 20)) for i in range(3000)] + [("cold", 0x1234_5678_9ABC_DEF0)])
    queries = [0x1234_5678_9ABC_DEF0, hot, hot, 0x1234_5678_9ABC_DEF0]
    answers = [a for _, a in index.near_many(queries, k=3, check=False)]
    assert [a.plan.kind for a in answers] == ["blocks", "blocks", "scan", "scan"]  # arrays loaded: cheap now
    stored = {f"hot{i}": hot ^ (i << 20) for i in range(3000)} | {"cold": 0x1234_5678_9ABC_DEF0}
    assert [(m.distance, m.key) for m in answers[2].matches] == brute_force(stored, hot, 3)
    assert [m.key for m in answers[3].matches] == ["cold"]
    assert [(m.distance, m.key) for m in index.near(fingerprint=hot, k=3, check=False)] == brute_force(stored, hot, 3)


def test_near_many_answers_in_order_with_errors_in_place(index):
    from simhash_sqlite import Document

    index.add([
        Document("a", "the first text about gardens"), Document("b", "the first text about gardens"), Document("e", "")
    ])
    fp = index.fingerprint("the first text about gardens")
    queries = [
        Query(text="the first text about gardens", id="t"),
        Query(key="a", id="k"),
        fp,
        Query(key="missing"),
        Query(key="e"),
        Query(text="..."),
        FailedQuery(Query(id=7), "line 7: not JSON"),
    ]
    answers = list(index.near_many(queries, k=3, check=False))
    assert len(answers) == len(queries)
    assert [m.key for m in answers[0][1].matches] == ["a", "b"] and answers[0][0].id == "t"
    assert [m.key for m in answers[1][1].matches] == ["b"]  # a key's own document is left out
    assert answers[2][1].fingerprint == fp
    assert [type(a).__name__ for _, a in answers[3:]] == ["FailedQuery"] * 4
    assert "no document with key" in answers[3][1].message and answers[6][1].message == "line 7: not JSON"
    with pytest.raises(InvalidInput):
        list(index.near_many([0], k=65, check=False))


def test_bulk_load_of_a_new_index_rebuilds_indexes_and_is_all_or_nothing(db_path):
    def names(conn):
        return sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'"))

    with SimhashIndex(db_path, create=True) as index:
        before, cache = names(index.conn), index.conn.pragma("cache_size")

        def items():
            yield from ((f"d{i}", i * 0x9E3779B97F4A7C15 & MASK) for i in range(5000))
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            index.add_fingerprints(items(), batch_size=1000)
        assert len(index) == 0 and names(index.conn) == before
        all_items = ((f"d{i}", i * 0x9E3779B97F4A7C15 & MASK) for i in range(5000))
        assert index.add_fingerprints(all_items, batch_size=1000) == 5000
        assert names(index.conn) == before and len(index) == 5000
        # Into a non-empty index: batch by batch, an existing key gets the new fingerprint.
        assert index.add_fingerprints([("d0", MASK), ("new", 0)]) == 2
        assert index.get("d0").fingerprint == MASK and len(index) == 5001
        assert [m.key for m in index.near(fingerprint=MASK, k=0, check=False)] == ["d0"]
        for bad in (-1, 1 << 64, 1.5, True, "ff"):
            with pytest.raises(InvalidInput):
                index.add_fingerprints([("ok", 5), ("bad", bad)])
        assert index.get("ok") is None
        assert index.conn.pragma("cache_size") == cache  # the load's large page cache is given back
    assert integrity_ok(db_path)


def test_plan_rule_without_an_index():
    assert [plan_for(k).kind for k in (0, 3, 4, 11, 19)] == ["blocks", "blocks", "probes", "probes", "probes"]
    assert plan_for(40).kind == "scan" and plan_for(64).kind == "scan"
    assert plan_for(11, rows=10_000_000).kind == "probes"
    assert plan_for(3, rows=10, candidates=4000).kind == "scan"


def test_cli_batch_jsonl_and_paths(runner, tmp_path, db_path):
    (tmp_path / "a.txt").write_text("a text about near duplicates and fingerprints", encoding="utf-8")
    assert simq(runner, "add", "--db", db_path, tmp_path / "a.txt").exit_code == 0
    key = str(tmp_path / "a.txt")
    fp = simq(runner, "hash", "--db", db_path, "--file", tmp_path / "a.txt").stdout.strip()
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        "\n".join(
            [
                json.dumps({"text": "a text about near duplicates and fingerprints", "id": "x"}),
                json.dumps({"hash": fp}),
                json.dumps({"key": key}),
                "",
                "not json",
                json.dumps({"text": "a", "hash": fp}),
                json.dumps({"hash": "zz"}),
            ]
        ),
        encoding="utf-8",
    )
    result = simq(runner, "near", "--db", db_path, "--batch", queries, "--k", "3", "--explain")
    assert_clean_error(result, "3 of 6 queries could not be searched")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["x", 2, 3, 5, 6, 7]
    assert lines[0]["matches"][0]["key"] == key and lines[0]["fingerprint"] == fp and "plan" in lines[0]
    assert lines[1]["matches"][0]["distance"] == 0 and lines[2]["matches"] == []
    assert all("error" in line for line in lines[3:])
    assert "candidates checked" in result.stderr

    paths = tmp_path / "paths.txt"
    paths.write_text(f"{tmp_path / 'a.txt'}\n{tmp_path / 'missing.txt'}\n", encoding="utf-8")
    result = simq(runner, "near", "--db", db_path, "--batch", paths)
    assert result.exit_code == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["matches"][0]["key"] == key and "error" in lines[1]

    ok = simq(runner, "near", "--db", db_path, "--batch", "-", input=json.dumps({"hash": fp}) + "\n")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["matches"][0]["key"] == key
    assert_clean_error(simq(runner, "near", "--db", db_path, "--batch", "-", "--key", key), "--batch reads", 2)
    assert_clean_error(simq(runner, "near", "--db", db_path, "--batch", tmp_path / "nope.jsonl"), "nope.jsonl")
    assert_clean_error(
        simq(runner, "near", "--db", db_path, "--batch", queries, "--batch-format", "csv"), "batch format", 2
    )


def test_cli_explain_says_plan_and_candidates(runner, db_path):
    with SimhashIndex(db_path, create=True) as index:
        index.add_fingerprints([("a", 0), ("b", 1)])
    result = simq(
        runner, "near", "--db", db_path, "--hash", "0" * 16, "--k", "7", "--plan", "index", "--explain", "--json"
    )
    assert result.exit_code == 0, result.output
    assert "plan: 4 block lookups x 17 value(s)" in result.stderr and "candidates checked: 8" in result.stderr
    assert [m["key"] for m in json.loads(result.stdout)] == ["a", "b"]
    assert_clean_error(simq(runner, "near", "--db", db_path, "--hash", "0" * 16, "--plan", "fast"), "plan must be", 2)


def test_readers_of_an_index_use_apsw_connections_we_open(db_path):
    # The batch path must leave the file a valid index that plain SQLite can read.
    with SimhashIndex(db_path, create=True) as index:
        index.add_fingerprints([("a", 0)])
    conn = apsw.Connection(str(db_path))
    assert conn.execute("SELECT count(*) FROM documents").get == 1


def test_standalone_near_sql_gives_the_same_answer(index):
    from simhash_sqlite.find.search import executed_sql, near_params, near_sql

    fps = [0, MASK, 1 << 63, 0x0123456789ABCDEF, flip(0x0123456789ABCDEF, [1, 17, 33, 49, 50]), 0xFFFF]
    index.add_fingerprints((f"d{i}", fp) for i, fp in enumerate(fps))
    for k in (0, 3, 7, 12, 40, 64):
        plan = plan_for(k)
        for q in (0, MASK, 0x0123456789ABCDEF):
            rows = [(key, d) for key, _, d in index.conn.execute(near_sql(plan), near_params(plan, q))]
            assert rows == [(m.key, m.distance) for m in index.near(fingerprint=q, k=k, check=False)], (k, q)
        assert "keys of the matches" in executed_sql(plan)
