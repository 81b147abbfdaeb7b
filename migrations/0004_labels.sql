-- 0004: what a person decided while reviewing (simq serve --review): a label for a pair of documents,
-- and the documents chosen to keep. Written only by the review pages (one transaction a decision),
-- read by dupes, clusters, dedup --against, calibrate --labels and decisions. Rows name documents by
-- key, so a label outlives the document's id (simq add of a changed file); rows of keys no longer in
-- the index are ignored. An index made before this migration has neither table: read-only, it is
-- read as an index without labels.

CREATE TABLE labels (
    first    TEXT NOT NULL,   -- the pair's two keys, in sorted order
    second   TEXT NOT NULL,
    label    TEXT NOT NULL CHECK (label IN ('duplicate', 'not_duplicate', 'unsure')),
    reviewer TEXT NOT NULL,   -- the name given to simq serve --review
    at       TEXT NOT NULL,   -- UTC, ISO 8601, when it was labelled (a later label replaces it)
    PRIMARY KEY (first, second),
    CHECK (first < second)
) STRICT, WITHOUT ROWID;

CREATE INDEX labels_second ON labels (second);

CREATE TABLE keepers (
    key      TEXT PRIMARY KEY,  -- a document to keep: its cluster's representative, never dropped
    reviewer TEXT NOT NULL,
    at       TEXT NOT NULL
) STRICT, WITHOUT ROWID;
