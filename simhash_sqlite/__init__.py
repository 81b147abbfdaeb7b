"""simhash-sqlite: near-duplicate search with 64-bit SimHash in a single SQLite file."""

__version__ = "0.1.0"

from .errors import (  # noqa: E402
    IndexNotFound,
    InvalidInput,
    NotAnIndex,
    SchemaTooNew,
    SettingsMismatch,
    SimhashError,
)
from .fingerprint import blocks, from_hex, hamming, simhash, to_hex, to_signed, to_unsigned  # noqa: E402
from .index import AddReport, Document, Match, Query, QueryError, SimhashIndex, StoredDocument  # noqa: E402
from .search import Plan, SearchResult  # noqa: E402
from .settings import FingerprintSettings  # noqa: E402

__all__ = [
    "AddReport",
    "Document",
    "FingerprintSettings",
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
    "from_hex",
    "hamming",
    "simhash",
    "to_hex",
    "to_signed",
    "to_unsigned",
]
