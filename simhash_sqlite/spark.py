"""The same fingerprints and the same dedup on Apache Spark, for corpora beyond one machine.

Fingerprints come from `simhash_sqlite.core.fingerprint.simhash` itself, wrapped in a pandas_udf, so a
document gets the same 64 bits here as in an index file. Fingerprints are Spark longs holding the
signed int64 form, exactly as SQLite stores them; `hex` columns print the unsigned 16 hex digits.

The job, each step a function over DataFrames:
  fingerprints_and_sketches  documents -> (id, fingerprint, sketch), one UDF for both
  sketch_pairs       candidate pairs from the sketches' window codes (the LSH of simq dedup)
  fingerprint_pairs  distinct fingerprints -> pairs within k through a BlockTables join (--k, --no-check)
  document_pairs     those pairs, plus documents sharing a fingerprint, as (id_a < id_b, distance)
  graph_components   connected components of the checked pairs (min-label propagation with
                     pointer jumping, no GraphFrames)
  keep_first         every document with its cluster, keeping the first in input order (as simq dedup)
  match_existing     a new batch against an existing set, broadcasting the smaller side
  run_dedup          all of it from a file to a folder of Parquet, a manifest and SQLite shards

Needs the `spark` extra (pip install 'simhash-sqlite[spark]') and Java 17.
"""

from __future__ import annotations

import inspect
import json
import os
import re
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
    from py4j.protocol import Py4JError
    from pyspark import StorageLevel
    from pyspark.errors import PySparkException
    from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import ArrayType, LongType
except ImportError as exc:  # the base install has no Spark; say how to get it, in one line
    raise ImportError(
        "pyspark (with pandas and pyarrow) is not installed: install simhash-sqlite[spark] "
        "(pip install 'simhash-sqlite[spark]')"
    ) from exc

import numpy as np

from .core.features import jieba_version
from .core.fingerprint import simhash, simhash_and_sketch_many, to_signed, to_unsigned
from .core.rule import READ_WHOLE_BYTES
from .core.settings import CONFIRM_K, DEFAULT_THRESHOLD, FingerprintSettings, candidate_k
from .core.shingles import jaccard_of_sets, shingle_set
from .core.short_texts import short_text_data, short_text_shingles
from .core.sketch import DEFAULT_SCHEME, as_rows
from .find.block_tables import BlockTables
from .find.check import EXACT_MARGIN
from .find.verdict import decide, fallback_k, sketch_estimates, validate_threshold
from .index import FingerprintedDocument, SimhashIndex
from .pipeline.dedup import window_codes
from .pipeline.shards import SHARD_PATTERN, shard_of
from .store.texts import content_hash
from .version import __version__

# What a failing Spark job raises (bad input data, a lost executor, no Java): the CLI shows one line.
JOB_ERRORS = (PySparkException, Py4JError)
MANIFEST = "manifest.json"
OUTPUTS = ("fingerprints", "pairs", "clusters", "kept")
TEXTS = "_texts"  # the documents' texts by node, while the job runs (the exact check's)


# -- session and input ---------------------------------------------------------------------------


def session(master: str | None = "local[*]", app_name: str = "simhash-sqlite", **conf: str) -> SparkSession:
    """A SparkSession for the job. master=None leaves it to spark-submit. In local mode shuffles get
    a few partitions per core instead of 200 (tiny tasks only add overhead on one machine)."""
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
        if master.startswith("local") and "spark.sql.shuffle.partitions" not in conf:
            builder = builder.config("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 2)))
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    for name, value in conf.items():
        builder = builder.config(name, value)
    use_worker_python(conf.get("spark.pyspark.python"))
    try:
        spark = builder.getOrCreate()
    except JOB_ERRORS as exc:
        raise SimhashError(
            f"could not start Spark (is Java 17 installed, with java on PATH or JAVA_HOME set?): {first_line(exc)}"
        ) from None
    # A failed job reaches the caller as one exception, which simq turns into one error line (failure());
    # Spark's own ERROR logs would print the same failure before it as pages of Java stack. A level given
    # as spark.log.level is the user's.
    if "spark.log.level" not in conf:
        spark.sparkContext.setLogLevel("OFF")
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


def failure(exc: BaseException) -> str:
    """Why a Spark job failed, in one line. A Py4JJavaError's own first line names only the JVM call that
    failed ("An error occurred while calling o31.json."): the reason is in its Java exception's chain of
    causes, the deepest with a Spark error class ("[MALFORMED_RECORD_IN_PARSING...] ...") and the root
    cause beneath it; a Python worker's failure ends with its exception's last line."""
    if "Traceback (most recent call last)" in str(exc):  # a Python worker's exception (PythonException)
        return f"a Python worker failed: {str(exc).strip().splitlines()[-1].strip()}"
    java = getattr(exc, "java_exception", None)
    chain: list[tuple[str, str]] = []  # (class, message) of each exception in the chain of causes
    try:
        while java is not None and len(chain) < 20:
            chain.append((str(java.getClass().getSimpleName()), str(java.getMessage() or "")))
            java = java.getCause()
    except Py4JError:  # the JVM is gone: what the Python side has
        pass
    if not chain:
        return first_line(exc)
    worker = [message for _, message in chain if "Traceback (most recent call last)" in message]
    if worker:  # a Python worker's exception, inside a failed stage
        return f"a Python worker failed: {worker[0].strip().splitlines()[-1].strip()}"
    classed = [message for _, message in chain if message.lstrip().startswith("[")]
    main = classed[-1] if classed else chain[0][1]
    said = re.sub(r"^\s*\[[A-Z_.]+\]\s*", "", main.strip().splitlines()[0] if main.strip() else "")
    root_name, root = chain[-1]
    root = root.strip().splitlines()[0] if root.strip() else ""
    if root and root not in said:
        said = f"{said} ({root_name}: {root})" if said else f"{root_name}: {root}"
    if "MALFORMED_RECORD" in main:
        said += "; a line of the JSONL is not a JSON object (Spark reads JSONL strictly: simq dedup skips such lines)"
    return said or first_line(exc)


def read_documents(spark: SparkSession, path: str, fmt: str | None = None) -> DataFrame:
    """Parquet (a file or a folder) or JSONL (*.jsonl, *.json, *.ndjson), by suffix unless fmt says."""
    fmt = fmt or ("jsonl" if str(path).rstrip("/").endswith((".jsonl", ".json", ".ndjson")) else "parquet")
    if fmt not in ("parquet", "jsonl"):
        raise InvalidInput(f"input format must be parquet or jsonl, not {fmt!r}")
    if "://" not in str(path) and not os.path.exists(path):
        raise InvalidInput(f"no such file or directory: {path}")
    return spark.read.parquet(str(path)) if fmt == "parquet" else spark.read.json(str(path), mode="FAILFAST")


def _require_columns(df: DataFrame, *names: str | None, text: str | None = None) -> None:
    """The named columns exist, and text (the column of the texts) holds strings: a JSONL whose text fields
    are all numbers reads as a bigint column, which would fail in the first UDF."""
    missing = [n for n in (*names, text) if n and n not in df.columns]
    if missing:
        raise InvalidInput(f"no column {', '.join(map(repr, missing))} in the input (it has: {', '.join(df.columns)})")
    kind = dict(df.dtypes).get(text) if text else "string"
    if kind != "string":
        raise InvalidInput(f"the text column {text!r} holds {kind} values, not strings")


# -- fingerprints ----------------------------------------------------------------------------------


def fingerprint_udf(settings: FingerprintSettings):
    """simhash() with these settings as a vectorized UDF: text -> signed int64, null without features."""

    @pandas_udf("long")  # type: ignore[call-overload]  # pyspark stub lacks the type-hint form
    def fingerprint(texts: pd.Series) -> pd.Series:
        values = []
        for text in texts:
            fp = None if text is None else simhash(text, settings)
            values.append(None if fp is None else to_signed(fp))
        return pd.Series(values, dtype="Int64")

    return fingerprint


def fingerprint_and_sketch_udf(settings: FingerprintSettings):
    """fingerprint.simhash_and_sketch_many as a vectorized UDF: text -> (signed int64 fingerprint,
    sketch bytes, short text's exact data, length, content hash), what `add` stores of a text: the
    fingerprint, sketch and short text null without letters or digits (the short text also for a text
    longer than core/short_texts.py keeps), one pass over the shingles."""

    @pandas_udf(  # type: ignore[call-overload]  # pyspark stub lacks the type-hint form
        "fingerprint long, sketch binary, short_text binary, length int, content_hash binary"
    )
    def fingerprint_and_sketch(texts: pd.Series) -> pd.DataFrame:
        texts = ["" if t is None else t for t in texts]
        prints, sketches = simhash_and_sketch_many(texts, settings)
        values = pd.Series([None if fp is None else to_signed(fp) for fp in prints], dtype="Int64")
        short = [None if fp is None else short_text_data(t) for t, fp in zip(texts, prints)]
        return pd.DataFrame({
            "fingerprint": values, "sketch": pd.Series(sketches, dtype=object),
            "short_text": pd.Series(short, dtype=object), "length": pd.Series([len(t) for t in texts], dtype="Int32"),
            "content_hash": pd.Series([content_hash(t) for t in texts], dtype=object),
        })

    return fingerprint_and_sketch


@pandas_udf(ArrayType(LongType()))  # type: ignore[call-overload]  # pyspark stub lacks the type-hint form
def window_codes_udf(sketches: pd.Series) -> pd.Series:
    """The codes of a sketch's LSH windows (dedup.window_codes, 79 of 24 bits): two documents are
    candidates exactly when they share one, as in `simq dedup`, and in `simq dupes` up to 2**20
    documents (past it dupes widens its windows, sketch_pairs.window_plan). Spark keeps 24/12 at any
    size: the kept set then equals simq dedup's, and the exploded codes (79 rows a document; 234 for
    27/4) outweigh the random candidates (79 * n / 2**25 a document) up to about 30M documents."""
    rows, _ = as_rows(list(sketches))
    return pd.Series(list(window_codes(rows).astype(np.int64)))


VERDICT_SCHEMA = "jaccard double, checked_by string, certainty double, drops boolean"


def _pair_estimates(fa: pd.Series, fb: pd.Series, sa: pd.Series, sb: pd.Series, threshold: float):
    """(distance, estimate, certainty) of candidate pairs' columns (NaN where a sketch is missing)."""
    distance = np.bitwise_count(fa.to_numpy(np.int64) ^ fb.to_numpy(np.int64)).astype(np.int64)
    rows_a, present_a = as_rows([None if x is None else bytes(x) for x in sa])
    rows_b, present_b = as_rows([None if x is None else bytes(x) for x in sb])
    estimate, sure = sketch_estimates(rows_a, rows_b, present_a & present_b, threshold)
    return distance, estimate, sure


def _shingles_of(value, texts: bool) -> np.ndarray | None:
    """The shingle set of a pair's side: a text (texts; None past READ_WHOLE_BYTES characters, as the
    check everywhere) or a short text's exact data."""
    if value is None:
        return None
    if texts:
        return shingle_set(value) if len(value) <= READ_WHOLE_BYTES else None
    return short_text_shingles(bytes(value))


def texts_wanted_udf(threshold: float, k: int, low: float | None):
    """Which candidate pairs (fingerprint, sketch of each side) the exact check needs the texts of: those
    decide() asks about (the sketch filter does not decide them), and, with low, whose estimate is not below
    it (else no candidate, as in simq dedup). The others never drop a document, so their texts are not
    joined."""

    @pandas_udf("boolean")  # type: ignore[call-overload]
    def wanted(fa: pd.Series, fb: pd.Series, sa: pd.Series, sb: pd.Series) -> pd.Series:
        distance, estimate, sure = _pair_estimates(fa, fb, sa, sb, threshold)
        asked = np.zeros(len(distance), dtype=bool)

        def exact(at: np.ndarray) -> np.ndarray:
            asked[at] = True
            return np.full(len(at), np.nan)

        decide(distance, estimate, sure, exact, threshold=threshold, k=k)
        if low is not None:
            asked &= ~(estimate < low)
        return pd.Series(asked, dtype=bool)

    return wanted


def verdict_udf(threshold: float, k: int, drop_uncertain: bool, low: float | None, texts: bool = False):
    """The pair rule (find/verdict.py decide(), as simq dupes and dedup judge) over columns of candidate
    pairs: (fingerprint, sketch, and the text (texts) or short_text) of each side -> (jaccard, checked_by,
    certainty, drops). drops: the verdict drops the later document, as simq dedup's (kept, and sure unless
    drop_uncertain); low: a pair of the sketches' LSH whose estimate is below it is no candidate, as in simq
    dedup (None: all are)."""

    @pandas_udf(VERDICT_SCHEMA)  # type: ignore[call-overload]  # pyspark stub lacks the type-hint form
    def verdict(fa: pd.Series, fb: pd.Series, sa: pd.Series, sb: pd.Series, ta: pd.Series, tb: pd.Series
                ) -> pd.DataFrame:
        distance, estimate, sure = _pair_estimates(fa, fb, sa, sb, threshold)
        texts_a, texts_b = list(ta), list(tb)

        def exact(at: np.ndarray) -> np.ndarray:
            out = np.full(len(at), np.nan)
            for n, i in enumerate(at.tolist()):
                a = _shingles_of(texts_a[i], texts)
                b = None if a is None else _shingles_of(texts_b[i], texts)
                if a is not None and b is not None:
                    out[n] = jaccard_of_sets(a, b)
            return out

        verdicts = decide(distance, estimate, sure, exact, threshold=threshold, k=k)
        drops = verdicts.sure_to_keep(drop_uncertain)
        if low is not None:
            drops &= ~(estimate < low)  # (NaN: no sketch, not from the LSH)
        return pd.DataFrame({
            "jaccard": pd.Series(verdicts.jaccard, dtype="float64"),
            "checked_by": pd.Series(verdicts.how, dtype=object),
            "certainty": pd.Series(verdicts.certainty, dtype="float64"),
            "drops": pd.Series(drops, dtype=bool),
        })

    return verdict


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
    _require_columns(docs, id_col, keep_by, text=text_col)
    extra = [F.col(keep_by)] if keep_by and keep_by not in (id_col, text_col) else []
    if keep_by == text_col:
        extra = [F.col(text_col).alias(keep_by)]
    return docs.select(
        F.col(id_col).alias("id"), fingerprint_udf(settings)(F.col(text_col)).alias("fingerprint"), *extra
    )


def fingerprints_and_sketches(docs: DataFrame, settings: FingerprintSettings, text_col: str, *keep: str) -> DataFrame:
    """docs' `keep` columns with fingerprint, sketch, short_text, length and content_hash, made in one UDF."""
    made = docs.select(*keep, fingerprint_and_sketch_udf(settings)(F.col(text_col)).alias("_made"))
    return made.select(*keep, *(f"_made.{name}" for name in STORED_COLUMNS))


# What `simq add` stores of a text besides its key, as the fingerprints output holds it.
STORED_COLUMNS = ("fingerprint", "sketch", "short_text", "length", "content_hash")


# -- pairs -----------------------------------------------------------------------------------------


def _signed(mask: int) -> Column:
    return F.lit(to_signed(mask)).cast("long")


def _first_table(xor: Column, scheme: BlockTables) -> Column:
    """The first table in which a pair with this XOR shares its key (see BlockTables.first_table)."""
    expr: Column | None = None
    for t, mask in enumerate(scheme.table_masks):
        cond = xor.bitwiseAND(_signed(mask)) == 0
        expr = F.when(cond, t) if expr is None else expr.when(cond, t)
    assert expr is not None, "a BlockTables scheme has at least one table"
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
    return _only_row(labels.agg(F.sum(F.col("label").cast("decimal(38,0)"))))[0] or 0


def _only_row(aggregate: DataFrame) -> Row:
    """The row of an aggregate over a whole frame: always exactly one (first() is None only when empty)."""
    row = aggregate.first()
    if row is None:
        raise SimhashError("an aggregate over a whole frame returned no row")
    return row


# -- clusters and the kept set ---------------------------------------------------------------------


def sketch_pairs(
    docs: DataFrame, threshold: float, drop_uncertain: bool = False, texts: DataFrame | None = None
) -> DataFrame:
    """(a, b, distance, jaccard, checked_by) with a < b for every pair of documents (columns node,
    fingerprint, sketch, short_text) that shares an LSH window of their sketches, whose estimate is at least
    threshold - EXACT_MARGIN and whose verdict drops a document (verdict_udf; texts: (node, text) of the
    documents, for the exact check): the pairs simq dedup finds (and simq dupes up to 2**20 documents)."""
    sketched = docs.where(F.col("sketch").isNotNull())
    codes = sketched.select("node", F.explode(window_codes_udf("sketch")).alias("code"))
    x, y = codes.alias("x"), codes.alias("y")
    candidates = x.join(y, (F.col("x.code") == F.col("y.code")) & (F.col("x.node") < F.col("y.node"))).select(
        F.col("x.node").alias("a"), F.col("y.node").alias("b")
    ).distinct()
    return _verified(candidates, sketched, threshold, CONFIRM_K, drop_uncertain, max(0.0, threshold - EXACT_MARGIN),
                     texts)


def _verified(
    candidates: DataFrame, docs: DataFrame, threshold: float, k: int, drop_uncertain: bool = False,
    low: float | None = None, texts: DataFrame | None = None,
) -> DataFrame:
    """Candidate pairs (a, b) of docs' nodes (columns node, fingerprint, sketch, and short_text where kept)
    whose verdict drops a document, by the one pair rule (verdict_udf; k: the candidates' radius, the
    distance rule's within min(k, RECOMMENDED_K)): (a, b, distance, jaccard, checked_by). texts: (node,
    text) of every node: both texts are at hand, so the pairs the sketch filter lets through (texts_wanted_udf)
    are joined with them and judged by their exact Jaccard; without, two short texts' exact data."""
    if "short_text" not in docs.columns:
        docs = docs.withColumn("short_text", F.lit(None).cast("binary"))
    sa, sb = docs.alias("sa"), docs.alias("sb")
    joined = candidates.join(sa, F.col("a") == F.col("sa.node")).join(sb, F.col("b") == F.col("sb.node"))
    sides = [F.col("sa.fingerprint"), F.col("sb.fingerprint"), F.col("sa.sketch"), F.col("sb.sketch")]
    text_a, text_b = F.col("sa.short_text"), F.col("sb.short_text")
    if texts is not None:
        joined = joined.where(texts_wanted_udf(threshold, k, low)(*sides))
        ta, tb = texts.alias("ta"), texts.alias("tb")
        joined = joined.join(ta, F.col("a") == F.col("ta.node")).join(tb, F.col("b") == F.col("tb.node"))
        text_a, text_b = F.col("ta.text"), F.col("tb.text")
    distance = F.bit_count(F.col("sa.fingerprint").bitwiseXOR(F.col("sb.fingerprint"))).cast("int")
    judged = joined.select(
        "a", "b", distance.alias("distance"),
        verdict_udf(threshold, k, drop_uncertain, low, texts is not None)(*sides, text_a, text_b).alias("_verdict"),
    )
    return judged.where(F.col("_verdict.drops")).select(
        "a", "b", "distance", F.col("_verdict.jaccard").alias("jaccard"),
        F.col("_verdict.checked_by").alias("checked_by"),
    )


KEPT_SCHEMA = "node long, kept boolean, duplicate_of long, jaccard double, distance int, checked_by string"


def keep_first(
    nodes: DataFrame, edges: DataFrame, labels: DataFrame, order: list[str], descending: bool = False
) -> DataFrame:
    """(node, kept, duplicate_of, jaccard, distance, checked_by) for every node: the greedy keep-first
    over the pairs, in `order` (the first column descending if asked, nulls last): a node is dropped
    when a kept node before it is its pair, for the best such (highest estimate, then the earliest;
    by distance: the closest, then the earliest), exactly as simq dedup decides in input order.

    The greedy runs per connected component of the pairs (`labels`: graph_components of them), one
    component in one task; a node in no pair is kept."""
    in_pairs = nodes.join(labels, "node")
    alone = nodes.join(labels, "node", "left_anti").select(
        "node", F.lit(True).alias("kept"), F.lit(None).cast("long").alias("duplicate_of"),
        F.lit(None).cast("double").alias("jaccard"), F.lit(None).cast("int").alias("distance"),
        F.lit(None).cast("string").alias("checked_by"),
    )
    edge_labels = labels.select(F.col("node").alias("a"), F.col("label").alias("edge_label"))  # fresh names
    grouped_edges = edges.join(edge_labels, "a")
    ascending = [not descending] + [True] * (len(order) - 1)

    def greedy(members: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
        members = members.sort_values(order, ascending=ascending, na_position="last", kind="stable")
        rank = {node: r for r, node in enumerate(members["node"].tolist())}
        near: dict[int, list] = {}
        for a, b, d, j, how in zip(pairs["a"].tolist(), pairs["b"].tolist(), pairs["distance"].tolist(),
                                   pairs["jaccard"].tolist(), pairs["checked_by"].tolist()):
            near.setdefault(a, []).append((b, d, j, how))
            near.setdefault(b, []).append((a, d, j, how))
        kept: set[int] = set()
        rows = []
        for node in members["node"].tolist():
            options = [
                ((0, -j, rank[other]) if how in ("exact", "estimated") else (1, d, rank[other]), other, j, d, how)
                for other, d, j, how in near.get(node, ()) if other in kept
            ]
            if options:
                _, other, j, d, how = min(options)
                rows.append((node, False, other, None if how not in ("exact", "estimated") else j, d, how))
            else:
                kept.add(node)
                rows.append((node, True, None, None, None, None))
        return pd.DataFrame(rows, columns=["node", "kept", "duplicate_of", "jaccard", "distance", "checked_by"])

    decided = in_pairs.groupBy("label").cogroup(grouped_edges.groupBy("edge_label")).applyInPandas(greedy, KEPT_SCHEMA)
    return decided.unionByName(alone)


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
    settings: FingerprintSettings | None = None,
    k: int | None = None,
    check: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    drop_uncertain: bool = False,
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
    """Read documents, write fingerprints (with sketches), pairs, clusters and kept documents as Parquet
    under `out`, a manifest, and optionally SQLite shards.

    The pairs are simq dedup's: with check (the default) and no k, documents sharing an LSH window of
    their sketches whose estimated Jaccard reaches the threshold; with a k, those within k so checked;
    without check, those within k (RECOMMENDED_K by default) by distance. They are verified before the
    components are formed, and each component is deduplicated keep-first in input order (files by
    path, rows in file order) or by keep_by: the same kept set as simq dedup on the same input. With
    `against` (an earlier run's folder), documents that pair with one of its documents are dropped
    first (matched_existing) and the rest deduplicated among themselves; its settings are used.
    """
    started = time.perf_counter()
    threshold = validate_threshold(threshold)
    by_sketch = check and k is None
    k = candidate_k(k, check)
    if not by_sketch and k > 10:
        BlockTables.for_k(k, blocks)  # says the block join stops at k = 10
    scheme = None if by_sketch else BlockTables.for_k(k, blocks)
    if keep_by == id_col:
        keep_by = None  # the id column is already the tie-break
    if sqlite_shards < 0:
        raise InvalidInput("sqlite_shards must not be negative")
    settings = settings or FingerprintSettings()
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
        existing = spark.read.parquet(os.path.join(against, "fingerprints"))
        # A run made before sketches, or with another sketch scheme (version 1, no sizes): judged by distance.
        if "sketch" not in existing.columns or previous.get("sketch") != json.loads(DEFAULT_SCHEME.to_json()):
            existing = existing.withColumn("sketch", F.lit(None).cast("binary"))
    docs = read_documents(spark, input_path, fmt)
    _require_columns(docs, id_col, keep_by, text=text_col)
    _prepare_out(out, overwrite)  # only once the input is known to be usable
    report = SparkDedupReport(out=out)

    def saved(frame: DataFrame, name: str) -> DataFrame:
        """Write a step's result and read it back: later steps reuse it without recomputing."""
        frame.write.parquet(os.path.join(out, name))
        return spark.read.parquet(os.path.join(out, name))

    with _phase(report, "fingerprints"):
        # Input order: the file, the split's start in it, the row's place in the split (its node number).
        extra = [keep_by] if keep_by and keep_by not in (id_col, text_col) else []
        located = docs.select(
            F.col(id_col).alias("id"), F.col(text_col).alias("_text"), *extra,
            F.col("_metadata.file_path").alias("_file"), F.col("_metadata.file_block_start").alias("_block"),
        ).withColumn("node", F.monotonically_increasing_id())
        if keep_by == text_col:
            located = located.withColumn(keep_by, F.col("_text"))
        made = fingerprints_and_sketches(located, settings, "_text", "id", "node", "_file", "_block", "_text",
                                         *extra)
        # Written with the texts in one job (the node numbers are made once), then without them: the exact
        # check joins its pairs with the texts (TEXTS, removed at the end).
        work = saved(made.select("id", "fingerprint", hex_of("fingerprint").alias("hex"), "sketch", "short_text",
                                 "length", "content_hash", "node", "_file", "_block", *extra,
                                 F.col("_text").alias("text")), TEXTS)
        fps = saved(work.drop("text"), "fingerprints")
        texts = work.where(F.col("fingerprint").isNotNull()).select("node", "text") if check else None
        report.documents, featured = _only_row(fps.agg(F.count("*"), F.count("fingerprint")))
        report.without_features = report.documents - featured

    todo = fps
    if existing is not None:
        with _phase(report, "match_existing"):
            matched = saved(_match_existing(fps, existing, k, by_sketch, check, threshold, scheme,
                                                  drop_uncertain), "matched_existing")
            report.matched_existing = matched.count()
            todo = fps.join(matched.select("id"), "id", "left_anti")

    with _phase(report, "pairs"):
        nodes = todo.where(F.col("fingerprint").isNotNull())
        if by_sketch:
            edges = sketch_pairs(nodes, threshold, drop_uncertain, texts)
        else:
            distinct = distinct_fingerprints(nodes).persist(StorageLevel.MEMORY_AND_DISK)
            report.distinct_fingerprints = distinct.count()
            fp_pairs = saved(fingerprint_pairs(distinct.select("fingerprint"), k, scheme), "fingerprint_pairs")
            report.fingerprint_pairs = fp_pairs.count()
            distinct.unpersist()
            within = document_pairs(nodes.select(F.col("node").alias("id"), "fingerprint"), fp_pairs).select(
                F.col("id_a").alias("a"), F.col("id_b").alias("b")
            )
            edges = _verified(within, nodes, threshold, k, drop_uncertain, texts=texts) if check else within.join(
                nodes.select(F.col("node").alias("a"), F.col("fingerprint").alias("fa")), "a"
            ).join(nodes.select(F.col("node").alias("b"), F.col("fingerprint").alias("fb")), "b").select(
                "a", "b", F.bit_count(F.col("fa").bitwiseXOR(F.col("fb"))).cast("int").alias("distance"),
                F.lit(None).cast("double").alias("jaccard"), F.lit(None).cast("string").alias("checked_by"),
            )
        edges = saved(edges, "node_pairs")
        ids = todo.select("node", "id")
        ia, ib = ids.alias("ia"), ids.alias("ib")
        pairs = edges.join(ia, F.col("a") == F.col("ia.node")).join(ib, F.col("b") == F.col("ib.node")).select(
            F.least("ia.id", "ib.id").alias("id_a"), F.greatest("ia.id", "ib.id").alias("id_b"),
            "distance", "jaccard", "checked_by",
        )
        report.pairs = saved(pairs, "pairs").count()

    with _phase(report, "clusters"):
        labels = graph_components(edges.select("a", "b")).localCheckpoint()
        order = ([keep_by, "id", "node"] if keep_by else ["_file", "_block", "node"])
        columns = ["node", *[c for c in order if c != "node"]]
        decided = keep_first(todo.select(*columns), edges, labels, order, descending=bool(keep_by and descending))
        named = _clusters(todo, decided, labels, order, bool(keep_by and descending))
        clustered = saved(named, "clusters")
        kept_ids = clustered.where("kept").select(F.col("id").alias("_kept_id"))
        report.kept = kept_ids.count()
        report.clusters = clustered.select("cluster").distinct().count()

    with _phase(report, "kept"):
        saved(docs.join(kept_ids, docs[id_col] == kept_ids["_kept_id"], "left_semi"), "kept")

    if sqlite_shards:
        with _phase(report, "sqlite_shards"):
            report.shards = write_shards(fps, os.path.join(out, "sqlite"), sqlite_shards, settings)
    shutil.rmtree(os.path.join(out, TEXTS), ignore_errors=True)
    report.seconds = time.perf_counter() - started
    rule = {"check": "the pair rule of simq dupes (the exact Jaccard of the two texts; against an earlier run, "
                     "exact for two short texts, else estimated)" if check else "distance",
            "candidates": "sketch LSH" if by_sketch else f"within {k}",
            "threshold": threshold if check else None, "drop_uncertain": drop_uncertain if check else None,
            "k": None if by_sketch else k}
    _write_manifest(out, report, settings, scheme, spark, input_path, id_col, text_col, keep_by, descending, against,
                    rule)
    return report


def _clusters(todo: DataFrame, decided: DataFrame, labels: DataFrame, order: list[str], descending: bool) -> DataFrame:
    """(id, fingerprint, cluster, size, kept, duplicate_of, jaccard, distance, checked_by): every document
    with its component (named after its first document in the keep order) and its verdict."""
    docs = todo.join(decided, "node").join(labels, "node", "left")
    docs = docs.withColumn("group", F.coalesce(F.col("label"), F.col("node")))
    first = [F.col(order[0]).desc_nulls_last() if descending else F.col(order[0]).asc_nulls_last()]
    window = Window.partitionBy("group").orderBy(*first, *[F.col(c) for c in order[1:]])
    ids = todo.select(F.col("node").alias("dup_node"), F.col("id").alias("dup_id"))
    return docs.join(ids, docs.duplicate_of == ids.dup_node, "left").select(
        "id", "fingerprint",
        F.first("id").over(window.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("cluster"),
        F.count("*").over(Window.partitionBy("group")).alias("size"),
        "kept", F.col("dup_id").alias("duplicate_of"), "jaccard", "distance", "checked_by",
    )


def _match_existing(fps, existing, k, by_sketch, check, threshold, scheme, drop_uncertain) -> DataFrame:
    """(id, existing_id, distance, jaccard, checked_by): each new document that pairs with an earlier
    run's document (the same rule as the pairs), with its best partner."""
    if not check:
        return match_existing(fps, existing, k, scheme=scheme).select(
            "id", "existing_id", "distance", F.lit(None).cast("double").alias("jaccard"),
            F.lit(None).cast("string").alias("checked_by"),
        )
    if "short_text" not in existing.columns:  # a run made before short texts' exact data
        existing = existing.withColumn("short_text", F.lit(None).cast("binary"))
    new = fps.where(F.col("fingerprint").isNotNull()).select(
        F.col("node"), "fingerprint", "sketch", "short_text", F.col("id").alias("new_id")
    )
    old = existing.where(F.col("fingerprint").isNotNull()).select(
        F.col("id").alias("existing_id"), "fingerprint", "sketch", "short_text"
    ).withColumn("node", -1 - F.monotonically_increasing_id())  # below zero: never a new node
    columns = ("node", "fingerprint", "sketch", "short_text")
    both = new.select(*columns).unionByName(old.select(*columns))
    found = []
    if by_sketch:
        codes_new = new.where(F.col("sketch").isNotNull()).select(
            "node", F.explode(window_codes_udf("sketch")).alias("code")
        )
        codes_old = old.where(F.col("sketch").isNotNull()).select(
            F.col("node").alias("old_node"), F.explode(window_codes_udf("sketch")).alias("code")
        )
        candidates = codes_new.join(codes_old, "code").select(F.col("old_node").alias("a"), F.col("node").alias("b"))
        low = max(0.0, threshold - EXACT_MARGIN)
        found.append(_verified(candidates.distinct(), both, threshold, CONFIRM_K, drop_uncertain, low))
        # Earlier documents without a sketch: within fallback_k(CONFIRM_K), by the same rule (exact where both
        # are short texts, else by distance: uncertain).
        unsketched = old.where(F.col("sketch").isNull())
        near = match_existing(fps, unsketched.select(F.col("existing_id").alias("id"), "fingerprint"),
                              fallback_k(CONFIRM_K))
        found.append(_verified(_node_pairs(near, old, new), both, threshold, CONFIRM_K, drop_uncertain))
    else:
        within = match_existing(fps, old.select(F.col("existing_id").alias("id"), "fingerprint"), k, scheme=scheme)
        found.append(_verified(_node_pairs(within, old, new), both, threshold, k, drop_uncertain))
    olds = old.select(F.col("node").alias("a"), "existing_id")
    news = new.select(F.col("node").alias("b"), F.col("new_id").alias("id"))
    matches = found[0]
    for more in found[1:]:
        matches = matches.unionByName(more)
    matches = matches.join(olds, "a").join(news, "b").select("id", "existing_id", "distance", "jaccard", "checked_by")
    best = Window.partitionBy("id").orderBy(
        (F.col("checked_by") != "estimated"), F.col("jaccard").desc_nulls_last(), "distance", "existing_id"
    )
    return matches.withColumn("_rank", F.row_number().over(best)).where("_rank = 1").drop("_rank")


def _node_pairs(within: DataFrame, old: DataFrame, new: DataFrame) -> DataFrame:
    """(a, b): the nodes of match_existing's (id, existing_id) pairs, an earlier run's document first."""
    return within.join(old.select("existing_id", F.col("node").alias("a")), "existing_id").join(
        new.select("new_id", F.col("node").alias("b")), within.id == F.col("new_id")
    ).select("a", "b")


def _prepare_out(out: str, overwrite: bool) -> None:
    if os.path.isdir(out) and os.listdir(out):
        if not overwrite:
            raise InvalidInput(f"{out} is not empty (an earlier output; --overwrite replaces it)")
        if not os.path.exists(os.path.join(out, MANIFEST)) and not any(
            os.path.exists(os.path.join(out, name)) for name in (*OUTPUTS, TEXTS)
        ):
            raise InvalidInput(f"{out} holds other files than a spark-dedup output; refusing to overwrite it")
        shutil.rmtree(out)
    elif os.path.exists(out) and not os.path.isdir(out):
        raise InvalidInput(f"{out} is a file, not a folder")
    os.makedirs(out, exist_ok=True)


def _write_manifest(
    out, report, settings, scheme, spark, input_path, id_col, text_col, keep_by, descending, against, rule
):
    manifest = {
        "tool": f"simhash-sqlite {__version__}",
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": settings_record(settings),
        "pairs": rule,
        "k": None if scheme is None else scheme.k,
        "scheme": None if scheme is None else scheme.to_dict(),
        "sketch": json.loads(DEFAULT_SCHEME.to_json()),  # how the fingerprints' sketches were made
        "input": {"path": str(input_path), "id_column": id_col, "text_column": text_col},
        "keep": {"by": keep_by or "input order", "descending": bool(descending and keep_by)},
        "against": against,
        "counts": {k_: v for k_, v in asdict(report).items() if k_ not in ("out", "shards", "seconds", "phases")},
        "outputs": {name: name for name in ("fingerprints", "pairs", "clusters", "kept")}
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
    SimhashIndex.add and the job's settings: what `simq add` stores of each text (fingerprint, sketch,
    length, content hash, a short text's exact data; not the text), so every command checks a shard's
    pairs as on any index. A document goes to shard_of(str(id)). fps without those columns (bare
    fingerprints) are written with SimhashIndex.add_fingerprints.
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
            if not stored:
                written = ix.add_fingerprints((key, to_unsigned(fp)) for _, (key, fp) in rows)
            else:
                report = ix.add(
                    FingerprintedDocument(key, to_unsigned(fp), length, bytes(digest),
                                          None if sketch is None else bytes(sketch), None,
                                          None if short is None else bytes(short))
                    for _, (key, fp, sketch, short, length, digest) in rows
                )
                written = report.added + report.updated
        os.replace(tmp, path)
        yield index, written

    stored = all(name in fps.columns for name in STORED_COLUMNS)
    columns = STORED_COLUMNS if stored else ("fingerprint",)
    keyed = (
        fps.where(F.col("fingerprint").isNotNull())
        .select(F.col("id").cast("string"), *columns)
        .rdd.map(lambda row: (shard_of(row[0], shards), tuple(row)))
        .partitionBy(shards, lambda shard: shard)
    )
    keyed.mapPartitionsWithIndex(write).collect()
    return [os.path.join(folder, SHARD_PATTERN.format(i)) for i in range(shards)]
