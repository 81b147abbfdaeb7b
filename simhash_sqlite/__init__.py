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
from .index import AddReport, Document, Match, SimhashIndex, StoredDocument  # noqa: E402
from .settings import FingerprintSettings  # noqa: E402

__all__ = [
    "AddReport",
    "Document",
    "FingerprintSettings",
    "ForeignSchema",
    "IndexNotFound",
    "InvalidInput",
    "Match",
    "NotAnIndex",
    "SchemaTooNew",
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
