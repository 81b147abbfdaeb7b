"""simhash-sqlite: near-duplicate search with 64-bit SimHash in a single SQLite file."""

__version__ = "0.1.0"

from .errors import (  # noqa: E402
    ForeignSchema,
    IndexNotFound,
    InvalidInput,
    NotAnIndex,
    SchemaTooNew,
    SettingsMismatch,
    SimhashError,
)
from .fingerprint import blocks, from_hex, hamming, simhash, to_hex, to_signed, to_unsigned  # noqa: E402
from .index import AddReport, Document, Match, Query, QueryError, SimhashIndex, StoredDocument  # noqa: E402
from .clusters import Cluster, ClusterReport  # noqa: E402
from .confirm import (  # noqa: E402
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
from .corpus import DuplicatePair  # noqa: E402
from .dedup import Decision, DedupReport, Deduplicator, dedup  # noqa: E402
from .search import Plan, SearchResult  # noqa: E402
from .settings import FingerprintSettings  # noqa: E402

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
