"""The same fingerprints and the same dedup on Apache Spark, for corpora beyond one machine.

Fingerprints come from `simhash_sqlite.fingerprint.simhash` itself, wrapped in a pandas_udf, so a
document gets the same 64 bits here as in an index file. Fingerprints are Spark longs holding the
signed int64 form, exactly as SQLite stores them; `hex` columns print the unsigned 16 hex digits.

The job, each step a function over DataFrames:
  fingerprints       documents -> (id, fingerprint)
  fingerprint_pairs  distinct fingerprints -> pairs within k through a BlockTables join (exact)
  document_pairs     those pairs, plus documents sharing a fingerprint, as (id_a < id_b, distance)
  components         connected components of the fingerprint graph (min-label propagation with
                     pointer jumping, no GraphFrames)
  clusters           every document with its cluster, named after the document it keeps
  match_existing     a new batch against an existing set, broadcasting the smaller side
  run_dedup          all of it from a file to a folder of Parquet, a manifest and SQLite shards

Needs the `spark` extra (pip install 'simhash-sqlite[spark]') and Java 17.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from .errors import InvalidInput, SimhashError

try:
    import pandas as pd
    import pyspark
    from pyspark import StorageLevel
    from pyspark.sql import Column, DataFrame, SparkSession, Window
    from pyspark.sql import functions as F
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql.functions import pandas_udf
except ImportError as exc:  # the base install has no Spark; say how to get it, in one line
    raise ImportError(
        "pyspark (with pandas and pyarrow) is not installed: install simhash-sqlite[spark] "
        "(pip install 'simhash-sqlite[spark]')"
    ) from exc

from .version import __version__
from .block_tables import BlockTables
from .features import jieba_version
from .fingerprint import simhash, to_signed, to_unsigned
from .index import SimhashIndex
from .settings import FingerprintSettings
from .shards import SHARD_PATTERN, shard_of

# What a failing Spark job raises (bad input data, a lost executor, no Java): the CLI shows one line.
JOB_ERRORS = (PySparkException, Py4JError)
MANIFEST = "manifest.json"
OUTPUTS = ("fingerprints", "pairs", "clusters", "kept")


# -- session and input ---------------------------------------------------------------------------


def session(master: str | None = "local[*]", app_name: str = "simhash-sqlite", **conf: str) -> SparkSession:
    """A SparkSession for the job. master=None leaves it to spark-submit. In local mode shuffles get
    a few partitions per core instead of 200 (tiny tasks only add overhead on one machine)."""
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
        if master.startswith("local"):
            builder = builder.config("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 2)))
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    for name, value in conf.items():
        builder = builder.config(name, value)
    use_worker_python(conf.get("spark.pyspark.python"))
    try:
        spark = builder.getOrCreate()
    except JOB_ERRORS as exc:
        raise SimhashError(f"could not start Spark (is Java 17 installed, with java on PATH or JAVA_HOME set?): {first_line(exc)}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def use_worker_python(configured: str | None = None) -> None:
    """Make Spark start its Python workers with this interpreter unless the user chose one.

    PySpark starts workers with $PYSPARK_PYTHON, else with whatever `python3` is first on PATH: run as
    `.venv/bin/simq` without an activated venv, that is the system Python, which lacks this package
    and fails in the first UDF. A SparkContext reads the variable when it starts, so this must run
    before getOrCreate; spark.pyspark.python, given as conf, is honoured as spark-submit honours it.
    On a cluster whose machines keep Python elsewhere, set PYSPARK_PYTHON (or the conf) to their path.
    """
    if configured:
        os.environ["PYSPARK_PYTHON"] = configured
    elif not os.environ.get("PYSPARK_PYTHON") and sys.executable:
        os.environ["PYSPARK_PYTHON"] = sys.executable


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def read_documents(spark: SparkSession, path: str, fmt: str | None = None) -> DataFrame:
    """Parquet (a file or a folder) or JSONL (*.jsonl, *.json, *.ndjson), by suffix unless fmt says."""
    fmt = fmt or ("jsonl" if str(path).rstrip("/").endswith((".jsonl", ".json", ".ndjson")) else "parquet")
    if fmt not in ("parquet", "jsonl"):
        raise InvalidInput(f"input format must be parquet or jsonl, not {fmt!r}")
    if "://" not in str(path) and not os.path.exists(path):
        raise InvalidInput(f"no such file or directory: {path}")
    return spark.read.parquet(str(path)) if fmt == "parquet" else spark.read.json(str(path), mode="FAILFAST")


def _require_columns(df: DataFrame, *names: str) -> None:
    missing = [n for n in names if n and n not in df.columns]
    if missing:
        raise InvalidInput(f"no column {', '.join(map(repr, missing))} in the input (it has: {', '.join(df.columns)})")


# -- fingerprints ----------------------------------------------------------------------------------


def fingerprint_udf(settings: FingerprintSettings):
    """simhash() with these settings as a vectorized UDF: text -> signed int64, null without features."""

    @pandas_udf("long")
    def fingerprint(texts: pd.Series) -> pd.Series:
        values = []
        for text in texts:
            fp = None if text is None else simhash(text, settings)
            values.append(None if fp is None else to_signed(fp))
        return pd.Series(values, dtype="Int64")

    return fingerprint


def hex_of(column: Column | str) -> Column:
    """16 lower-case hex digits of the unsigned fingerprint (Spark's hex() of a long is two's complement)."""
    return F.lower(F.lpad(F.hex(column), 16, "0"))


def fingerprints(
    docs: DataFrame,
    settings: FingerprintSettings = FingerprintSettings(),
    *,
    id_col: str = "id",
    text_col: str = "text",
    keep_by: str | None = None,
) -> DataFrame:
    """(id, fingerprint[, keep_by]) for every document; fingerprint is null for a text without features."""
    _require_columns(docs, id_col, text_col, keep_by)
    extra = [F.col(keep_by)] if keep_by and keep_by not in (id_col, text_col) else []
    if keep_by == text_col:
        extra = [F.col(text_col).alias(keep_by)]
    return docs.select(
        F.col(id_col).alias("id"), fingerprint_udf(settings)(F.col(text_col)).alias("fingerprint"), *extra
    )


# -- pairs -----------------------------------------------------------------------------------------


def _signed(mask: int) -> Column:
    return F.lit(to_signed(mask)).cast("long")


def _first_table(xor: Column, scheme: BlockTables) -> Column:
    """The first table in which a pair with this XOR shares its key (see BlockTables.first_table)."""
    expr = None
    for t, mask in enumerate(scheme.table_masks):
        cond = xor.bitwiseAND(_signed(mask)) == 0
        expr = F.when(cond, t) if expr is None else expr.when(cond, t)
    return expr


def _table_keys(fps: DataFrame, scheme: BlockTables) -> DataFrame:
    """(table, key, fingerprint): every fingerprint once per table."""
    keys = F.array(
        *[F.struct(F.lit(t).alias("table"), F.col("fingerprint").bitwiseAND(_signed(m)).alias("key"))
          for t, m in enumerate(scheme.table_masks)]
    )
    return fps.select("fingerprint", F.explode(keys).alias("tk")).select("tk.table", "tk.key", "fingerprint")


def fingerprint_pairs(distinct: DataFrame, k: int, scheme: BlockTables | None = None) -> DataFrame:
    """(a, b, distance) with a < b (signed) for distinct fingerprints 1..k bits apart, each pair once.

    `distinct` has one row per fingerprint (column `fingerprint`, no nulls). Exact: the result equals
    a brute force over all pairs.
    """
    scheme = scheme or BlockTables.for_k(k)
    if scheme.k < k:
        raise InvalidInput(f"the block tables are exact up to k={scheme.k}, not k={k}")
    spark = distinct.sparkSession
    empty = spark.createDataFrame([], "a long, b long, distance int")
    if k == 0:
        return empty  # distinct fingerprints are at least 1 bit apart
    keyed = _table_keys(distinct, scheme)
    left, right = keyed.alias("l"), keyed.alias("r")
    joined = left.join(
        right,
        (F.col("l.table") == F.col("r.table")) & (F.col("l.key") == F.col("r.key"))
        & (F.col("l.fingerprint") < F.col("r.fingerprint")),
    )
    xor = F.col("l.fingerprint").bitwiseXOR(F.col("r.fingerprint"))
    return (
        joined.where((F.bit_count(xor) <= k) & (_first_table(xor, scheme) == F.col("l.table")))
        .select(
            F.col("l.fingerprint").alias("a"),
            F.col("r.fingerprint").alias("b"),
            F.bit_count(xor).cast("int").alias("distance"),
        )
    )


def distinct_fingerprints(fps: DataFrame) -> DataFrame:
    """Identical fingerprints collapsed: one row per fingerprint with how many documents have it."""
    return fps.where(F.col("fingerprint").isNotNull()).groupBy("fingerprint").agg(F.count("*").alias("documents"))


def document_pairs(fps: DataFrame, fp_pairs: DataFrame) -> DataFrame:
    """(id_a, id_b, distance) with id_a < id_b: documents with equal fingerprints (distance 0) and the
    documents behind every fingerprint pair. Each unordered pair once."""
    docs = fps.where(F.col("fingerprint").isNotNull()).select("id", "fingerprint")
    a, b = docs.alias("a"), docs.alias("b")
    same = a.join(b, (F.col("a.fingerprint") == F.col("b.fingerprint")) & (F.col("a.id") < F.col("b.id"))).select(
        F.col("a.id").alias("id_a"), F.col("b.id").alias("id_b"), F.lit(0).alias("distance")
    )
    near = (
        fp_pairs.alias("p")
        .join(a, F.col("a.fingerprint") == F.col("p.a"))
        .join(b, F.col("b.fingerprint") == F.col("p.b"))
    ).select(
        F.least("a.id", "b.id").alias("id_a"), F.greatest("a.id", "b.id").alias("id_b"), F.col("p.distance")
    )
    return same.unionByName(near)


# -- connected components --------------------------------------------------------------------------


def graph_components(edges: DataFrame, *, max_rounds: int = 100) -> DataFrame:
    """(node, label): every node of an undirected graph (columns a, b) with the smallest node of its component.

    Min-label propagation with pointer jumping: each round a node takes the smallest label among
    itself and its neighbours, then the label of that label. Labels only fall and stay within the
    component, so the sum of labels stops falling exactly when no label changes; pointer jumping
    makes long chains converge in about log(diameter) rounds instead of diameter.
    """
    both = edges.select(F.col("a").alias("src"), F.col("b").alias("dst")).unionByName(
        edges.select(F.col("b").alias("src"), F.col("a").alias("dst"))
    ).persist(StorageLevel.MEMORY_AND_DISK)
    labels = both.select(F.col("src").alias("node")).distinct().withColumn("label", F.col("node"))
    labels = labels.localCheckpoint()
    total = _label_sum(labels)
    for _ in range(max_rounds):
        offered = both.join(labels, both.src == labels.node).select(F.col("dst").alias("node"), "label")
        propagated = labels.unionByName(offered).groupBy("node").agg(F.min("label").alias("label"))
        p, q = propagated.alias("p"), propagated.alias("q")
        jumped = p.join(q, F.col("p.label") == F.col("q.node")).select(
            F.col("p.node").alias("node"), F.col("q.label").alias("label")
        )
        labels = jumped.localCheckpoint()
        new_total = _label_sum(labels)
        if new_total == total:
            both.unpersist()
            return labels
        total = new_total
    raise SimhashError(f"connected components did not converge in {max_rounds} rounds")


def _label_sum(labels: DataFrame) -> int:
    return labels.agg(F.sum(F.col("label").cast("decimal(38,0)"))).first()[0] or 0


# -- clusters and the kept set ---------------------------------------------------------------------


def clusters(
    fps: DataFrame,
    fp_pairs: DataFrame,
    *,
    keep_by: str | None = None,
    descending: bool = False,
) -> DataFrame:
    """(id, fingerprint, cluster, size, kept): every document in a cluster named after the one it keeps.

    Clusters are connected components of "within k" (documents with equal fingerprints always
    together). The kept document is the lowest id, or the first by keep_by (ascending unless
    descending; ties broken by the lowest id). A document without features is a cluster of one.
    """
    components_ = graph_components(fp_pairs.select("a", "b"))
    featured = fps.where(F.col("fingerprint").isNotNull())
    grouped = featured.join(components_, featured.fingerprint == components_.node, "left").select(
        *featured.columns, F.coalesce("label", "fingerprint").cast("string").alias("group")
    )
    alone = fps.where(F.col("fingerprint").isNull()).select(
        *fps.columns, F.concat(F.lit("id:"), F.col("id").cast("string")).alias("group")
    )
    docs = grouped.unionByName(alone)
    order = [F.col("id")]
    if keep_by:
        first = F.col(keep_by).desc_nulls_last() if descending else F.col(keep_by).asc_nulls_last()
        order = [first, F.col("id")]
    window = Window.partitionBy("group").orderBy(*order)
    everyone = Window.partitionBy("group")
    ranked = docs.select(
        "id",
        "fingerprint",
        F.first("id").over(window.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("cluster"),
        F.count("*").over(everyone).alias("size"),
        (F.row_number().over(window) == 1).alias("kept"),
    )
    return ranked


# -- a new batch against an existing set -----------------------------------------------------------


def match_existing(
    batch: DataFrame,
    existing: DataFrame,
    k: int,
    *,
    scheme: BlockTables | None = None,
    broadcast: str = "auto",
) -> DataFrame:
    """(id, existing_id, distance): each batch document within k of an existing one, with its nearest
    (ties: the lowest existing id). Both sides are (id, fingerprint) frames.

    broadcast: "batch", "existing", "none", or "auto" (count both sides' distinct fingerprints and
    broadcast the smaller, as a daily crawl batch against a large index wants).
    """
    scheme = scheme or BlockTables.for_k(k)
    if broadcast not in ("auto", "batch", "existing", "none"):
        raise InvalidInput(f"broadcast must be auto, batch, existing or none, not {broadcast!r}")
    new_fps = batch.where(F.col("fingerprint").isNotNull()).select("fingerprint").distinct()
    old_fps = existing.where(F.col("fingerprint").isNotNull()).select("fingerprint").distinct()
    if broadcast == "auto":
        broadcast = "batch" if new_fps.count() <= old_fps.count() else "existing"
    new_keys, old_keys = _table_keys(new_fps, scheme).alias("n"), _table_keys(old_fps, scheme).alias("o")
    if broadcast == "batch":
        new_keys = F.broadcast(new_keys)
    elif broadcast == "existing":
        old_keys = F.broadcast(old_keys)
    xor = F.col("n.fingerprint").bitwiseXOR(F.col("o.fingerprint"))
    candidates = new_keys.join(
        old_keys, (F.col("n.table") == F.col("o.table")) & (F.col("n.key") == F.col("o.key"))
    ).where(F.bit_count(xor) <= k)
    near = candidates.select(
        F.col("n.fingerprint").alias("new_fp"), F.col("o.fingerprint").alias("old_fp"),
        F.bit_count(xor).cast("int").alias("distance"),
    ).distinct()
    old_docs = existing.where(F.col("fingerprint").isNotNull()).select(
        F.col("id").alias("existing_id"), F.col("fingerprint").alias("old_fp")
    )
    best = (
        near.join(old_docs, "old_fp")
        .groupBy("new_fp")
        .agg(F.min(F.struct("distance", "existing_id")).alias("best"))
    )
    return batch.join(best, batch.fingerprint == best.new_fp).select(
        "id", F.col("best.existing_id").alias("existing_id"), F.col("best.distance").alias("distance")
    )


# -- the whole job ---------------------------------------------------------------------------------


@dataclass
class SparkDedupReport:
    """What run_dedup wrote, with counts (the manifest holds the same)."""

    out: str
    documents: int = 0
    without_features: int = 0
    distinct_fingerprints: int = 0
    fingerprint_pairs: int = 0
    pairs: int = 0
    clusters: int = 0
    kept: int = 0
    matched_existing: int | None = None
    shards: list[str] = field(default_factory=list)
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds per step


@contextmanager
def _phase(report: SparkDedupReport, name: str):
    started = time.perf_counter()
    yield
    report.phases[name] = round(time.perf_counter() - started, 2)


def settings_record(settings: FingerprintSettings) -> dict:
    """What an index file records about its fingerprints: the settings, and jieba's version for words."""
    record = {"fingerprint": json.loads(settings.to_json())}
    if settings.features == "words":
        record["jieba_version"] = jieba_version()
    return record


def read_manifest(folder: str) -> dict:
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise InvalidInput(f"{folder} has no {MANIFEST}: not the output of simq spark-dedup") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path} is not JSON ({exc.msg})") from None


def run_dedup(
    spark: SparkSession,
    input_path: str,
    out: str,
    *,
    settings: FingerprintSettings = FingerprintSettings(),
    k: int = 3,
    blocks: int | None = None,
    id_col: str = "id",
    text_col: str = "text",
    fmt: str | None = None,
    keep_by: str | None = None,
    descending: bool = False,
    against: str | None = None,
    sqlite_shards: int = 0,
    overwrite: bool = False,
) -> SparkDedupReport:
    """Read documents, write fingerprints, pairs, clusters and kept documents as Parquet under `out`,
    a manifest, and optionally SQLite shards. With `against` (an earlier run's folder), documents
    within k of that run's fingerprints are dropped first (written to matched_existing) and the
    rest are deduplicated among themselves; the earlier run's settings are used.
    """
    started = time.perf_counter()
    scheme = BlockTables.for_k(k, blocks)
    if keep_by == id_col:
        keep_by = None  # the id column is already the tie-break
    if sqlite_shards < 0:
        raise InvalidInput("sqlite_shards must not be negative")
    existing = None
    if against is not None:
        previous = read_manifest(against)
        recorded = FingerprintSettings.from_json(json.dumps(previous["settings"]["fingerprint"]))
        if recorded != settings and settings != FingerprintSettings():
            raise InvalidInput(
                f"{against} was made with {recorded.describe()}; you asked for {settings.describe()} "
                "(fingerprints with other settings would never match)"
            )
        settings = recorded
        existing = spark.read.parquet(os.path.join(against, "fingerprints")).select("id", "fingerprint")
    docs = read_documents(spark, input_path, fmt)
    _require_columns(docs, id_col, text_col, keep_by)
    _prepare_out(out, overwrite)  # only once the input is known to be usable
    report = SparkDedupReport(out=out)

    def saved(frame: DataFrame, name: str) -> DataFrame:
        """Write a step's result and read it back: later steps reuse it without recomputing."""
        frame.write.parquet(os.path.join(out, name))
        return spark.read.parquet(os.path.join(out, name))

    with _phase(report, "fingerprints"):
        fps = fingerprints(docs, settings, id_col=id_col, text_col=text_col, keep_by=keep_by)
        fps = saved(fps.select("id", "fingerprint", hex_of("fingerprint").alias("hex"), *fps.columns[2:]), "fingerprints")
        fps = fps.drop("hex")
        report.documents, featured = fps.agg(F.count("*"), F.count("fingerprint")).first()
        report.without_features = report.documents - featured

    todo = fps
    if existing is not None:
        with _phase(report, "match_existing"):
            matched = saved(match_existing(fps, existing, k, scheme=scheme), "matched_existing")
            report.matched_existing = matched.count()
            todo = fps.join(matched.select("id"), "id", "left_anti")

    with _phase(report, "pairs"):
        distinct = distinct_fingerprints(todo).persist(StorageLevel.MEMORY_AND_DISK)
        report.distinct_fingerprints = distinct.count()
        fp_pairs = saved(fingerprint_pairs(distinct.select("fingerprint"), k, scheme), "fingerprint_pairs")
        report.fingerprint_pairs = fp_pairs.count()
        distinct.unpersist()
        report.pairs = saved(document_pairs(todo, fp_pairs), "pairs").count()

    with _phase(report, "clusters"):
        clustered = saved(clusters(todo, fp_pairs, keep_by=keep_by, descending=descending), "clusters")
        kept_ids = clustered.where("kept").select(F.col("id").alias("_kept_id"))
        report.clusters = report.kept = kept_ids.count()

    with _phase(report, "kept"):
        saved(docs.join(kept_ids, docs[id_col] == kept_ids["_kept_id"], "left_semi"), "kept")

    if sqlite_shards:
        with _phase(report, "sqlite_shards"):
            report.shards = write_shards(fps, os.path.join(out, "sqlite"), sqlite_shards, settings)
    report.seconds = time.perf_counter() - started
    _write_manifest(out, report, settings, scheme, spark, input_path, id_col, text_col, keep_by, descending, against)
    return report


def _prepare_out(out: str, overwrite: bool) -> None:
    if os.path.isdir(out) and os.listdir(out):
        if not overwrite:
            raise InvalidInput(f"{out} is not empty (pass overwrite=True / --overwrite to replace it)")
        if not os.path.exists(os.path.join(out, MANIFEST)) and not any(
            os.path.exists(os.path.join(out, name)) for name in OUTPUTS
        ):
            raise InvalidInput(f"{out} holds other files than a spark-dedup output; refusing to overwrite it")
        shutil.rmtree(out)
    elif os.path.exists(out) and not os.path.isdir(out):
        raise InvalidInput(f"{out} is a file, not a folder")
    os.makedirs(out, exist_ok=True)


def _write_manifest(out, report, settings, scheme, spark, input_path, id_col, text_col, keep_by, descending, against):
    manifest = {
        "tool": f"simhash-sqlite {__version__}",
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": settings_record(settings),
        "k": scheme.k,
        "scheme": scheme.to_dict(),
        "input": {"path": str(input_path), "id_column": id_col, "text_column": text_col},
        "keep": {"by": keep_by or "id", "descending": bool(descending and keep_by)},
        "against": against,
        "counts": {k_: v for k_, v in asdict(report).items() if k_ not in ("out", "shards", "seconds", "phases")},
        "outputs": {name: name for name in ("fingerprints", "fingerprint_pairs", "pairs", "clusters", "kept")}
        | ({"matched_existing": "matched_existing"} if against else {})
        | ({"sqlite_shards": [os.path.relpath(p, out) for p in report.shards]} if report.shards else {}),
        "fingerprint_encoding": "signed int64 (two's complement), as SQLite stores it; hex: unsigned, 16 digits",
        "spark": {"version": pyspark.__version__, "master": spark.sparkContext.master},
        "seconds": round(report.seconds, 1),
        "phase_seconds": report.phases,
    }
    tmp = os.path.join(out, MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    os.replace(tmp, os.path.join(out, MANIFEST))


# -- SQLite shards ---------------------------------------------------------------------------------


def _index_options(settings: FingerprintSettings) -> dict:
    """SimhashIndex keyword arguments that reproduce these settings (whatever settings it accepts)."""
    accepted = inspect.signature(SimhashIndex).parameters
    return {name: value for name, value in asdict(settings).items() if name in accepted}


def write_shards(fps: DataFrame, folder: str, shards: int, settings: FingerprintSettings) -> list[str]:
    """One index file per shard (shard-00000.db, ...), written in parallel by the executors, each with
    SimhashIndex.add_fingerprints and the job's settings. A document goes to shard_of(str(id)).
    Documents without features are left out (they never match). The folder must be one every
    executor can write (local mode, or a shared filesystem on a cluster)."""
    if shards < 1:
        raise InvalidInput("the number of shards must be at least 1")
    os.makedirs(folder, exist_ok=True)
    folder = os.path.abspath(folder)
    options = _index_options(settings)

    def write(index: int, rows):
        path = os.path.join(folder, SHARD_PATTERN.format(index))
        tmp = path + ".tmp"
        for leftover in (tmp, tmp + "-wal", tmp + "-shm"):  # a retried task starts afresh
            if os.path.exists(leftover):
                os.remove(leftover)
        with SimhashIndex(tmp, create=True, **options) as ix:
            if ix.settings != settings:
                raise SimhashError(f"shard settings {ix.settings} differ from the job's {settings}")
            written = ix.add_fingerprints((key, to_unsigned(fp)) for _, (key, fp) in rows)
        os.replace(tmp, path)
        yield index, written

    keyed = (
        fps.where(F.col("fingerprint").isNotNull())
        .select(F.col("id").cast("string"), "fingerprint")
        .rdd.map(lambda row: (shard_of(row[0], shards), (row[0], row[1])))
        .partitionBy(shards, lambda shard: shard)
    )
    keyed.mapPartitionsWithIndex(write).collect()
    return [os.path.join(folder, SHARD_PATTERN.format(i)) for i in range(shards)]
