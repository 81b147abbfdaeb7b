"""simhash-sqlite: near-duplicate search with 64-bit SimHash in a single SQLite file."""

from .version import __version__
from .errors import (
    ForeignSchema,
    IndexNotFound,
    InvalidInput,
    NotAnIndex,
    SchemaTooNew,
    SettingsMismatch,
    SimhashError,
)
from .fingerprint import blocks, from_hex, hamming, simhash, to_hex, to_signed, to_unsigned
from .index import AddReport, Document, Match, Query, QueryError, SimhashIndex, StoredDocument
from .clusters import Cluster, ClusterReport
from .confirm import (
    CheckedMatch,
    CheckedPair,
    CheckedSearch,
    ConfirmedPairs,
    ConfirmReport,
    confirmed_clusters,
    confirmed_near,
    confirmed_near_many,
    confirmed_pairs,
)
from .index_arrays import DuplicatePair
from .dedup import Decision, DedupReport, Deduplicator, dedup
from .search import Plan, SearchResult
from .settings import FingerprintSettings

__all__ = [
    "AddReport",
    "CheckedMatch",
    "CheckedPair",
    "CheckedSearch",
    "ConfirmReport",
    "ConfirmedPairs",
    "Cluster",
    "ClusterReport",
    "Decision",
    "DedupReport",
    "Deduplicator",
    "DuplicatePair",
    "Document",
    "FingerprintSettings",
    "ForeignSchema",
    "IndexNotFound",
    "InvalidInput",
    "Match",
    "NotAnIndex",
    "Plan",
    "Query",
    "QueryError",
    "SchemaTooNew",
    "SearchResult",
    "SettingsMismatch",
    "SimhashError",
    "SimhashIndex",
    "StoredDocument",
    "blocks",
    "confirmed_clusters",
    "confirmed_near",
    "confirmed_near_many",
    "confirmed_pairs",
    "dedup",
    "from_hex",
    "hamming",
    "simhash",
    "to_hex",
    "to_signed",
    "to_unsigned",
]
