-- 0006: where a JSONL document's text lives, so that a pair of documents added from JSONL files is checked by
-- its exact Jaccard without stored texts (store/texts.py): the line is read again and accepted only while
-- its text's content hash is still the stored one. One row a JSONL file added (path relative to
-- simhash_meta 'key_root' when inside it, else absolute, as file keys are; its size and mtime when added;
-- how its lines were read); per document, its source and its line's byte offset and length (the newline
-- included). NULL: a text file (its key is its path), stdin, a stored text, a bare fingerprint, or a
-- document added before this migration. An index made before it, opened read-only, has neither: its
-- JSONL documents are estimated, as before.

CREATE TABLE sources (
    id         INTEGER PRIMARY KEY,
    path       TEXT NOT NULL,
    size       INTEGER NOT NULL,   -- bytes, when last added from
    mtime_ns   INTEGER NOT NULL,   -- modification time (ns since 1970), when last added from
    text_field TEXT NOT NULL,      -- the record's field holding the text (simq add --text-field)
    encoding   TEXT NOT NULL,      -- how its bytes were decoded (--encoding, --errors)
    errors     TEXT NOT NULL,
    UNIQUE (path, text_field, encoding, errors)
) STRICT;

ALTER TABLE documents ADD COLUMN source INTEGER;   -- sources.id (no foreign key: a source outlives its documents)
ALTER TABLE documents ADD COLUMN line_at INTEGER;  -- the line's first byte in the source
ALTER TABLE documents ADD COLUMN line_bytes INTEGER;
