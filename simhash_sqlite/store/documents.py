"""The documents that go into an index and come out of it, and what an add did."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.short_texts import SHORT_TEXT_BYTES, SHORT_TEXT_MOST
from .texts import SourceFile

# Where a JSONL record's line is: (its file, the line's first byte, its bytes with the newline), so that its text
# can be read again for an exact check (store/texts.py TextReader).
LineAt = tuple[SourceFile, int, int]


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
    short_text: bytes | None = None  # short_texts.short_text_data() of a short text, when the reader made it
    line: LineAt | None = None  # a JSONL record's line in a file that can be read again (not stdin)


@dataclass
class FingerprintedBatch:
    """Fingerprinted documents as columns, in order (the records of a JSONL chunk, pipeline.sources.Reader with
    packed=True): what add() writes without an object per document. Keys are distinct."""

    keys: list[str]
    fingerprints: list[int | None]
    lengths: list[int]
    content_hashes: list[bytes]
    sketches: list[bytes | None]
    short_texts: list[bytes | None]
    texts: list[str | None] | None = None  # for an index that stores texts
    lines: list[LineAt | None] | None = None  # where each record's line is (None: nowhere to read it again)

    def __len__(self) -> int:
        return len(self.keys)

    def part(self, start: int, end: int) -> FingerprintedBatch:
        """Documents start to end (a slice of every column)."""
        return FingerprintedBatch(
            self.keys[start:end], self.fingerprints[start:end], self.lengths[start:end],
            self.content_hashes[start:end], self.sketches[start:end], self.short_texts[start:end],
            None if self.texts is None else self.texts[start:end],
            None if self.lines is None else self.lines[start:end],
        )  # fmt: skip

    def documents(self) -> list[FingerprintedDocument]:
        """One FingerprintedDocument per row, for a consumer that wants objects."""
        texts = self.texts if self.texts is not None else [None] * len(self.keys)
        lines = self.lines if self.lines is not None else [None] * len(self.keys)
        return [
            fingerprinted(*row)
            for row in zip(self.keys, self.fingerprints, self.lengths, self.content_hashes, self.sketches, texts,
                           self.short_texts, lines)
        ]  # fmt: skip


def joined(batches: list[FingerprintedBatch]) -> FingerprintedBatch:
    """The batches' rows, one after the other."""
    if len(batches) == 1:
        return batches[0]
    texts = None if any(b.texts is None for b in batches) else [t for b in batches for t in b.texts or ()]
    lines = None
    if any(b.lines is not None for b in batches):
        lines = [line for b in batches for line in (b.lines if b.lines is not None else [None] * len(b))]
    return FingerprintedBatch(
        [k for b in batches for k in b.keys], [f for b in batches for f in b.fingerprints],
        [n for b in batches for n in b.lengths], [h for b in batches for h in b.content_hashes],
        [s for b in batches for s in b.sketches], [s for b in batches for s in b.short_texts], texts, lines,
    )  # fmt: skip


_new = object.__new__


def fingerprinted(
    key: str, fingerprint: int | None, length: int, content_hash: bytes, sketch: bytes | None, text: str | None,
    short_text: bytes | None, line: LineAt | None = None,
) -> FingerprintedDocument:
    """FingerprintedDocument(...), the same object, made without the frozen dataclass's __init__ (an
    object.__setattr__ a field: 4 times the cost, paid once a JSONL record by the reading process)."""
    document = _new(FingerprintedDocument)
    document.__dict__.update(key=key, fingerprint=fingerprint, length=length, content_hash=content_hash,
                             sketch=sketch, text=text, short_text=short_text, line=line)
    return document


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


@dataclass(frozen=True)
class ShortTexts:
    """Whether an index keeps the exact data of short texts (migration 0005, short_texts.py), and how many
    documents lack it: added before (an index made before exact short texts) with texts not stored and
    short enough that they might have had it. Their pairs are estimated from the sketches."""

    kept: bool
    column: bool = True  # documents.short_text exists (an older index opened read-only has none)
    lacking: int | None = None  # (None: not counted)
    stored: int | None = None  # documents holding it (None: not counted)

    def describe(self) -> str:
        stored, lacking, most = self.stored or 0, self.lacking or 0, SHORT_TEXT_MOST
        exact = f"exact for short texts: {stored:,} documents keep their text deflated (<= {SHORT_TEXT_BYTES} bytes)"
        if self.kept and not self.lacking:
            return exact
        told = (f"made before exact short texts: {lacking:,} document(s) of at most {most:,} characters whose "
                "texts are not stored are checked by their sketches' estimate")
        if not self.kept:
            return told + " (opened for writing, e.g. by simq add, it keeps exact data for new documents)"
        return f"{exact}; {told}"
