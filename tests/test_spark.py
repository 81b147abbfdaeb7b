"""The Spark job against the single-machine tool: same fingerprints, same pairs, same clusters and kept set.

Spark runs in local mode (local[2], loopback) with one SparkSession for the whole file; one run of
`simq spark-dedup` over about two thousand generated documents feeds most checks. The references are
an index file built with SimhashIndex.add, a numpy brute force over all pairs, and a union-find.
Run alone with `pytest -m spark`; skipped (with the reason shown) when pyspark or Java is missing.
"""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from test_cli import assert_clean_error, simq

from simhash_sqlite import Document, SimhashIndex, to_hex, to_signed, to_unsigned
from simhash_sqlite.cli.app import app  # noqa: F401 (simq() runs it)
from simhash_sqlite.core.settings import FingerprintSettings
from simhash_sqlite.find.block_tables import BlockTables
from simhash_sqlite.pipeline.shards import near_in_shards, shard_of, shard_paths

HAVE_SPARK = importlib.util.find_spec("pyspark") is not None and shutil.which("java") is not None


def spark_test(test):
    """Marked `spark` (run alone with -m spark); skipped, with the reason shown, without pyspark or Java."""
    reason = "pyspark or java missing: pip install '.[test,spark]' (and Java 17)"
    return pytest.mark.spark(pytest.mark.skipif(not HAVE_SPARK, reason=reason)(test))

K = 3
SHARDS = 12  # more than SQLite's default limit of ten attached databases
# The tests' JVMs compile with C1 only and collect with the serial collector: their jobs take seconds, and C2
# compiling what they will not run long enough to repay, with G1's threads, doubled the JVMs' CPU (the
# session and its job: 74 s of CPU without these, 41 s with them, the same wall time). Spark's behaviour is
# the same; these are the JVM's own options, nothing of Spark's or ours.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


# -- the corpus and the single-machine reference -----------------------------------------------------


def make_corpus(seed: int = 8) -> list[dict]:
    """Random-word texts with chains of one-word edits (some within K, some beyond), exact copies,
    case/space variants, Chinese texts and featureless ones; ids shuffled against generation order."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, rng.integers(3, 9))) for _ in range(3000)]
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 800)]
    texts: list[str] = []
    for i in range(700):
        if i % 10 == 0:
            words = ["".join(rng.choice(han, rng.integers(1, 4))) for _ in range(rng.integers(30, 60))]
        else:
            words = list(rng.choice(vocab, rng.integers(40, 90)))
        texts.append(" ".join(words))
        for _ in range(int(rng.integers(0, 4))):  # a chain of edits, each on the previous version
            words = list(words)
            words[int(rng.integers(len(words)))] = str(rng.choice(vocab))
            texts.append(" ".join(words))
    texts += [texts[int(i)] for i in rng.integers(0, len(texts), 150)]  # exact copies
    texts += ["  " + texts[int(i)].upper() + " " for i in rng.integers(0, len(texts), 30)]  # same after normalizing
    texts += ["", "!!!", "...", "  "]  # no features
    order = rng.permutation(len(texts))
    return [
        {"id": f"doc-{int(n):05d}", "text": texts[i], "prio": int(rng.integers(0, 5))}
        for n, i in zip(range(len(texts)), order)
    ]


def brute_force_pairs(ids: list[str], fps: list[int], k: int) -> set[tuple[str, str, int]]:
    arr = np.array(fps, dtype=np.uint64)
    out = set()
    for i in range(len(arr) - 1):
        d = np.bitwise_count(arr[i] ^ arr[i + 1 :])
        for j in np.nonzero(d <= k)[0]:
            a, b = ids[i], ids[i + 1 + int(j)]
            out.add((min(a, b), max(a, b), int(d[j])))
    return out


def reference_keep_first(ids: list[str], pairs, prio: dict[str, int]) -> set[str]:
    """Keep-first over the pairs in the order --keep-by prio --descending asks for (highest prio, then
    lowest id): a document is dropped when a kept one before it is its pair."""
    near: dict[str, set[str]] = {}
    for a, b, _ in pairs:
        near.setdefault(a, set()).add(b), near.setdefault(b, set()).add(a)
    kept: set[str] = set()
    for i in sorted(ids, key=lambda i: (-prio[i], i)):
        if not near.get(i, set()) & kept:
            kept.add(i)
    return kept


def reference_clusters(ids: list[str], pairs, prio: dict[str, int]) -> dict[str, str]:
    """Union-find over the pairs; each document -> the id of its cluster's first document
    (highest prio, then lowest id: what --keep-by prio --descending asks for)."""
    parent = {i: i for i in ids}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, _ in pairs:
        parent[find(a)] = find(b)
    members: dict[str, list[str]] = {}
    for i in ids:
        members.setdefault(find(i), []).append(i)
    kept = {}
    for group in members.values():
        keeper = min(group, key=lambda i: (-prio[i], i))
        kept.update({i: keeper for i in group})
    return kept


@pytest.fixture(scope="module")
def corpus():
    return make_corpus()


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """What the single-machine tool says: fingerprints from a real index file, brute-force pairs."""
    path = tmp_path_factory.mktemp("reference") / "index.db"
    with SimhashIndex(path, create=True) as index:
        index.add(Document(d["id"], d["text"]) for d in corpus)
        stored = {key: index.get(key).fingerprint for key in index.keys()}
    featured = sorted(key for key, fp in stored.items() if fp is not None)
    pairs = brute_force_pairs(featured, [stored[i] for i in featured], K)
    prio = {d["id"]: d["prio"] for d in corpus}
    clusters = reference_clusters(sorted(stored), pairs, prio)
    kept = reference_keep_first(sorted(stored), pairs, prio)
    return {"fingerprints": stored, "pairs": pairs, "clusters": clusters, "kept": kept, "path": path}


@pytest.fixture(scope="module")
def spark():
    """One local SparkSession shared by every test in this file."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from simhash_sqlite.spark import session

    spark = session("local[2]", **{"spark.sql.shuffle.partitions": "4", "spark.driver.extraJavaOptions": JVM_OPTIONS})
    yield spark
    spark.stop()


@pytest.fixture(scope="module")
def job(spark, corpus, tmp_path_factory):
    """One run of `simq spark-dedup` over the corpus (Parquet in), with SQLite shards."""
    from typer.testing import CliRunner

    folder = tmp_path_factory.mktemp("job")
    source = folder / "corpus.parquet"
    spark.createDataFrame(corpus, "id string, text string, prio int").write.parquet(str(source))
    out = folder / "out"
    result = simq(
        CliRunner(), "spark-dedup", source, "--out", out, "--no-check", "--k", K, "--master", "local[2]",
        "--keep-by", "prio", "--descending", "--sqlite-shards", SHARDS,
    )
    assert result.exit_code == 0, result.output
    return {"out": out, "stdout": result.stdout}


def parquet_rows(spark, path: Path) -> list[dict]:
    return [row.asDict() for row in spark.read.parquet(str(path)).collect()]


# -- the job against the single-machine tool ----------------------------------------------------------


@spark_test
def test_spark_dedup_equals_the_single_machine_tool(spark, job, reference):
    out = job["out"]
    # Fingerprints: the signed int64 SQLite stores, and the same hex the index gives.
    fps = {r["id"]: r for r in parquet_rows(spark, out / "fingerprints")}
    assert fps.keys() == reference["fingerprints"].keys()
    for key, expected in reference["fingerprints"].items():
        got = fps[key]["fingerprint"]
        assert (None if got is None else to_unsigned(got)) == expected, key
        assert fps[key]["hex"] == (None if expected is None else to_hex(expected))
    # Pairs: each unordered pair once, exactly the brute force's.
    pairs = [(r["id_a"], r["id_b"], r["distance"]) for r in parquet_rows(spark, out / "pairs")]
    assert len(pairs) == len(set(pairs))
    assert set(pairs) == reference["pairs"]
    assert any(d == 0 for *_, d in pairs) and any(d == K for *_, d in pairs)  # copies and edits both present
    # Clusters (components, named after their first document by --keep-by prio --descending, ties by
    # lowest id) and the kept set: keep-first in that order, as simq dedup --no-check decides.
    rows = parquet_rows(spark, out / "clusters")
    clusters = {r["id"]: r["cluster"] for r in rows}
    assert clusters == reference["clusters"]
    kept = {r["id"] for r in parquet_rows(spark, out / "kept")}
    assert kept == reference["kept"] == {r["id"] for r in rows if r["kept"]}
    assert kept > set(reference["clusters"].values())  # a chain keeps its ends when they are far apart
    assert max(list(clusters.values()).count(c) for c in kept) >= 3  # chains joined into larger clusters
    assert all(r["checked_by"] is None and (r["duplicate_of"] is None) == r["kept"] for r in rows)
    # The manifest records what shaped the fingerprints, as an index file does.
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["fingerprint"] == json.loads(FingerprintSettings().to_json())
    assert manifest["scheme"] == {"k": 3, "blocks": 6, "tables": 20, "key_bits": [31, 33]}
    assert manifest["counts"]["kept"] == len(kept) and manifest["counts"]["pairs"] == len(pairs)
    assert f"{len(kept):,}" in job["stdout"]


@spark_test
def test_sqlite_shards_are_ordinary_indexes_searched_one_at_a_time(job, reference, runner):
    paths = shard_paths(job["out"] / "sqlite")
    assert len(paths) == SHARDS
    featured = {k: fp for k, fp in reference["fingerprints"].items() if fp is not None}
    seen = {}
    for number, path in enumerate(paths):
        with SimhashIndex(path) as index:
            assert index.settings == FingerprintSettings()
            for key in index.keys():
                assert shard_of(key, SHARDS) == number
                seen[key] = index.get(key).fingerprint
    assert seen == featured
    # A search over all shards finds what a brute force finds.
    query_key = next(a for a, b, d in sorted(reference["pairs"]) if d > 0)
    query = featured[query_key]
    expected = sorted((int(np.bitwise_count(np.uint64(query ^ fp))), key) for key, fp in featured.items()
                      if (query ^ fp).bit_count() <= K)
    found = near_in_shards(paths, fingerprint=query, k=K, check=False)
    assert [(m.distance, m.key) for m in found] == expected
    # Each shard opens with simq itself.
    shard_db = paths[shard_of(query_key, SHARDS)]
    result = simq(runner, "near", "--db", shard_db, "--key", query_key, "--k", 64, "--no-check", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)


@spark_test
def test_sqlite_shards_hold_what_simq_add_stores_so_they_are_checked_as_any_index(job, reference, runner):
    stored = "SELECT key, length, content_hash, sketch, short_text FROM documents WHERE fingerprint IS NOT NULL"
    with SimhashIndex(reference["path"]) as index:
        expected = {row[0]: row[1:] for row in index.conn.execute(stored)}
    found = {}
    kinds = set()
    for path in shard_paths(job["out"] / "sqlite"):
        with SimhashIndex(path) as index:
            found.update({row[0]: row[1:] for row in index.conn.execute(stored)})
        result = simq(runner, "dupes", "--db", path, "--format", "jsonl")
        assert result.exit_code == 0, result.output
        kinds |= {json.loads(line)["checked_by"] for line in result.stdout.splitlines()}
        assert "hint" not in result.stderr
    assert found == expected  # sketches, lengths, content hashes and short texts' exact data, as add makes them
    assert any(row[3] is not None for row in found.values()) and all(row[2] is not None for row in found.values())
    assert "exact" in kinds and kinds <= {"exact", "estimated"}  # never by distance alone


@spark_test
def test_golden_fingerprints_through_spark(spark):
    from simhash_sqlite.spark import fingerprints, hex_of

    golden = Path(__file__).parent / "golden" / "fingerprints.jsonl"
    rows = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines()]
    frames = []
    for settings_json in sorted({json.dumps(r["settings"], sort_keys=True) for r in rows}):
        group = [
            (i, r["text"]) for i, r in enumerate(rows) if json.dumps(r["settings"], sort_keys=True) == settings_json
        ]
        docs = spark.createDataFrame(group, "id int, text string")
        frames.append(fingerprints(docs, FingerprintSettings(**json.loads(settings_json))))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    got = {r["id"]: r["hex"] for r in union.select("id", hex_of("fingerprint").alias("hex")).collect()}
    assert len(got) == len(rows)
    for i, row in enumerate(rows):
        assert got[i] == row["simhash"], row


@spark_test
def test_batch_against_existing_and_wider_k(spark, job, reference):
    """A new batch against an existing set (both broadcast directions), and pairs at k = 6 (9 blocks)."""
    from pyspark.sql import functions as F

    from simhash_sqlite.spark import distinct_fingerprints, fingerprint_pairs, match_existing

    fps = spark.read.parquet(str(job["out"] / "fingerprints")).select("id", "fingerprint")
    existing, batch = fps.where(F.col("id") < "doc-00800"), fps.where(F.col("id") >= "doc-00800")
    featured = {k: fp for k, fp in reference["fingerprints"].items() if fp is not None}
    old = sorted(k for k in featured if k < "doc-00800")
    expected = {}
    for key in (k for k in featured if k >= "doc-00800"):
        near = [((featured[key] ^ featured[o]).bit_count(), o) for o in old]
        best = min(near)
        if best[0] <= K:
            expected[key] = (best[1], best[0])
    assert expected
    for side in ("batch", "existing"):
        matched = match_existing(batch, existing, K, broadcast=side).collect()
        got = {r["id"]: (r["existing_id"], r["distance"]) for r in matched}
        assert got == expected, side
    # k = 6 through the 9-block scheme (84 tables), fingerprint pairs against a brute force.
    scheme = BlockTables.for_k(6)
    assert (scheme.blocks, scheme.tables) == (9, 84)
    got = {(r["a"], r["b"], r["distance"])
           for r in fingerprint_pairs(distinct_fingerprints(fps).select("fingerprint"), 6).collect()}
    distinct = sorted({to_signed(fp) for fp in featured.values()})  # Spark orders pairs by the signed form
    want = {(a, b, d) for a, b, d in brute_force_pairs(distinct, [to_unsigned(x) for x in distinct], 6)}
    assert got == want and any(d > 3 for *_, d in want)


@spark_test
def test_bad_input_is_one_clean_line(spark, job, runner, tmp_path):
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"key": "a", "text": "hello world"}) + "\n")
    assert_clean_error(
        simq(runner, "spark-dedup", source, "--out", tmp_path / "o1", "--master", "local[2]"), "no column 'id'"
    )
    assert_clean_error(simq(runner, "spark-dedup", tmp_path / "nope.parquet", "--out", tmp_path / "o2"), "no such file")
    assert_clean_error(simq(runner, "spark-dedup", source, "--out", job["out"], "--id-field", "key"), "not empty")
    assert_clean_error(
        simq(runner, "spark-dedup", source, "--out", tmp_path / "o3", "--id-col", "key", "--against", job["out"],
             "--features", "words"),
        "would never match",
    )
    assert_clean_error(simq(runner, "spark-dedup", source, "--out", tmp_path / "o4", "--k", 11), "at most k=10")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "text": "fine"}\n{broken\n')
    # The reason, from the Java exception's causes (not "An error occurred while calling o31.json.")
    result = simq(runner, "spark-dedup", broken, "--out", tmp_path / "o5")
    assert_clean_error(result, "the Spark job failed: Malformed records")
    assert "a line of the JSONL is not a JSON object" in result.stderr and "calling o" not in result.stderr
    assert not (tmp_path / "o5").exists()
    numbers = tmp_path / "numbers.jsonl"
    numbers.write_text('{"id": "a", "text": 5}\n{"id": "b", "text": 7}\n')
    result = simq(runner, "spark-dedup", numbers, "--out", tmp_path / "o6")
    assert_clean_error(result, "the text column 'text' holds bigint values, not strings")
    assert not (tmp_path / "o6").exists()


@spark_test
def test_a_python_workers_failure_is_named_by_its_last_line(spark):
    from pyspark.sql import functions as F

    from simhash_sqlite.spark import JOB_ERRORS, failure

    with pytest.raises(JOB_ERRORS) as caught:
        spark.range(1).select(F.udf(lambda x: 1 // (x - x), "long")("id")).collect()
    assert failure(caught.value) == "a Python worker failed: ZeroDivisionError: integer division or modulo by zero"


# -- as a user runs it: the venv's simq by path, a clean environment, local and a standalone cluster ----


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def user_environment(tmp_path: Path) -> dict[str, str]:
    """What a user's shell has: no activated venv, no PYSPARK_PYTHON, and a `python3` on PATH that lacks
    this package (a stand-in for the system Python, so the test means the same on every machine)."""
    shim = tmp_path / "system-bin"
    shim.mkdir(exist_ok=True)
    (shim / "python3").write_text("#!/bin/sh\necho 'this python3 has no simhash_sqlite' >&2\nexit 1\n")
    (shim / "python3").chmod(0o755)
    java_dir = os.path.dirname(shutil.which("java") or "/usr/bin/java")
    env = {"PATH": f"{shim}:{java_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "SPARK_LOCAL_IP": "127.0.0.1"}  # loopback only; not a Python setting
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def venv_simq() -> str:
    """The `simq` script installed next to this interpreter, by absolute path."""
    script = Path(sys.executable).parent / "simq"
    if not script.exists():
        pytest.skip(f"no simq script next to {sys.executable} (install the package with pip)")
    return str(script)


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    """A Spark standalone master and one 1-core worker on 127.0.0.1 (free ports), from pyspark's own
    bin/spark-class; stopped by their process ids afterwards."""
    if not HAVE_SPARK:
        pytest.skip("pyspark or java missing: pip install '.[test,spark]' (and Java 17)")
    import pyspark

    home = Path(pyspark.__file__).parent
    folder = tmp_path_factory.mktemp("cluster")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(folder / "work"), "SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS}
    port, ui = free_port(), free_port()
    spark_class = [str(home / "bin" / "spark-class")]
    master_url = f"spark://127.0.0.1:{port}"
    started = []

    def start(name, *args):
        with open(folder / f"{name}.log", "wb") as log:  # the child keeps its own copy of the handle
            proc = subprocess.Popen(spark_class + list(args), env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        started.append(proc)
        return proc

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(ui))
        start("worker", "org.apache.spark.deploy.worker.Worker", master_url, "--cores", "1", "--memory", "2g",
              "--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port()))
        deadline = time.monotonic() + 90
        while True:  # until the master's status page lists the worker as alive
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as page:
                    if json.load(page).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            for proc in started:
                if proc.poll() is not None:
                    pytest.fail(f"a Spark daemon exited early; see {folder}")
            if time.monotonic() > deadline:
                pytest.fail(f"the standalone cluster did not come up in 90 s; see {folder}")
            time.sleep(0.5)
        yield master_url
    finally:
        for proc in reversed(started):  # worker first: it stops its executors
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run_as_user(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([venv_simq(), *args], env=user_environment(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)


@spark_test
@pytest.mark.parametrize("where", ["local", "standalone"])
def test_simq_spark_dedup_as_a_user_runs_it(where, request, tmp_path, corpus, reference):
    """`.venv/bin/simq spark-dedup in.jsonl --out out` with no venv activated and no PYSPARK_PYTHON:
    its Python workers must still be the venv's (local[*] by default, or a standalone cluster)."""
    # Few documents: the run's cost is Spark's start, the Python workers' and the job's steps, not the texts.
    small = [d for d in corpus if d["id"] < ("doc-00200" if where == "standalone" else "doc-00080")]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in small), encoding="utf-8")
    args = ["spark-dedup", "in.jsonl", "--out", "out", "--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
            "--conf", f"spark.executor.extraJavaOptions={JVM_OPTIONS}"]  # the JVMs' options only (JVM_OPTIONS)
    if where == "standalone":  # one core: a few shuffle partitions, not Spark's 200
        args += ["--master", request.getfixturevalue("standalone_cluster"), "--conf", "spark.sql.shuffle.partitions=2"]
    result = run_as_user(tmp_path, *args)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["spark"]["master"].startswith("spark://" if where == "standalone" else "local")
    import pyarrow.parquet as pq

    kept = set(pq.read_table(tmp_path / "out" / "kept").column("id").to_pylist())
    # The same kept set as simq dedup's on the same file (checked, keep-first in input order).
    from typer.testing import CliRunner

    result = simq(CliRunner(), "dedup", source, "--out", tmp_path / "dedup.jsonl",
                  "--dupes", tmp_path / "dropped.jsonl")
    assert result.exit_code == 0, result.output
    expected = {json.loads(line)["id"] for line in (tmp_path / "dedup.jsonl").read_text().splitlines()}
    assert kept == expected and len(kept) < len(small) - 3
    dropped = {r["key"]: r for r in map(json.loads, (tmp_path / "dropped.jsonl").read_text().splitlines())}
    clusters = pq.read_table(tmp_path / "out" / "clusters").to_pylist()
    # Each drop with the same verdict: the same partner, checked the same way, the same Jaccard (one rule).
    spark_drops = {r["id"]: (r["duplicate_of"], r["checked_by"], round(r["jaccard"], 4))
                   for r in clusters if not r["kept"]}
    assert spark_drops == {key: (r["duplicate_of"], r["checked_by"], r["jaccard"]) for key, r in dropped.items()}


# -- without Spark ------------------------------------------------------------------------------------


def test_spark_dedup_without_pyspark_says_how_to_install(runner, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark now raises ImportError
    monkeypatch.delitem(sys.modules, "simhash_sqlite.spark", raising=False)
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"id": "a", "text": "hello world"}) + "\n")
    result = simq(runner, "spark-dedup", source, "--out", tmp_path / "out")
    assert_clean_error(result, "install simhash-sqlite[spark]")
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1
    assert not (tmp_path / "out").exists()


def test_the_base_install_never_imports_pyspark():
    code = ("import sys, simhash_sqlite, simhash_sqlite.cli.app, simhash_sqlite.pipeline.shards; "
            "print('pyspark' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
