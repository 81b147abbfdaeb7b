"""simhash-sqlite: near-duplicate search with 64-bit SimHash in a single SQLite file.

The names below are the library's public surface (docs/python-api.md); everything else may change.
"""

from .batch_queries import Query, QueryError
from .checks import CheckReport, check_index
from .clusters import Cluster, ClusterReport
from .confirm import ConfirmReport, DuplicatePairs
from .dedup import Decision, Deduplicator, DedupReport, dedup
from .errors import (
    ForeignSchema,
    IndexNotFound,
    InvalidInput,
    NotAnIndex,
    SchemaTooNew,
    SettingsMismatch,
    SimhashError,
)
from .fingerprint import from_hex, hamming, simhash, to_hex, to_signed, to_unsigned
from .index import AddReport, Document, FingerprintedDocument, SimhashIndex, Stats, StoredDocument
from .index_arrays import DuplicatePair
from .search import Match, SearchResult
from .settings import FingerprintSettings
from .shards import near_in_shards
from .version import __version__

__all__ = [
    "AddReport",
    "CheckReport",
    "Cluster",
    "ClusterReport",
    "ConfirmReport",
    "Decision",
    "DedupReport",
    "Deduplicator",
    "Document",
    "DuplicatePair",
    "DuplicatePairs",
    "FingerprintSettings",
    "FingerprintedDocument",
    "ForeignSchema",
    "IndexNotFound",
    "InvalidInput",
    "Match",
    "NotAnIndex",
    "Query",
    "QueryError",
    "SchemaTooNew",
    "SearchResult",
    "SettingsMismatch",
    "SimhashError",
    "SimhashIndex",
    "Stats",
    "StoredDocument",
    "__version__",
    "check_index",
    "dedup",
    "from_hex",
    "hamming",
    "near_in_shards",
    "simhash",
    "to_hex",
    "to_signed",
    "to_unsigned",
]
