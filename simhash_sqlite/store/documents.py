"""The documents that go into an index and come out of it, and what an add did."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Document:
    """A text to index under a unique key (a path, or an id of the user's)."""

    key: str
    text: str


@dataclass(frozen=True)
class FingerprintedDocument:
    """A document fingerprinted before add(): a large file streamed in pieces, or a JSONL record
    fingerprinted in a worker process (pipeline.sources.Reader). Its text is kept only for an index that stores
    texts."""

    key: str
    fingerprint: int | None  # unsigned, made with the index's settings; None: no features
    length: int
    content_hash: bytes
    sketch: bytes | None = None  # sketch.sketch() of the text, when the reader made one
    text: str | None = None  # the text, for an index that stores texts (never one streamed in pieces)


@dataclass(frozen=True)
class StoredDocument:
    key: str
    fingerprint: int | None  # unsigned; None when the text had no features
    length: int | None  # None for a bare fingerprint (add_fingerprints)
    content_hash: str | None
    text: str | None
    added_at: str


@dataclass
class AddReport:
    """What an add did. Counts cover committed batches only."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    no_features: list[str] = field(default_factory=list)  # the first keys stored with no fingerprint
    without_features: int = 0  # all of them (the list keeps only the first, so memory stays bounded)
    batches: int = 0
    characters: int = 0
    short: int = 0  # added or updated texts under settings.SHORT_TEXT characters (noisier distances)
    last_key: str | None = None  # the last document of the last committed batch

    @property
    def documents(self) -> int:
        return self.added + self.updated + self.unchanged


def length_of(doc: Document | FingerprintedDocument) -> int:
    """A document's length in characters, whether its text is at hand or it came fingerprinted."""
    return doc.length if isinstance(doc, FingerprintedDocument) else len(doc.text)
