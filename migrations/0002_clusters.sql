-- 0002: near-duplicate clusters, written by `simq clusters` / SimhashIndex.clusters(k).
-- One row per document (those without features are clusters of one). Rewritten whole on every run,
-- so it describes the documents present at that run; simhash_meta 'clusters' records k and the rule.
-- SELECT cluster, count(*) FROM clusters GROUP BY cluster;  keep one of each: WHERE id = representative.

CREATE TABLE clusters (
    id             INTEGER PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    cluster        INTEGER NOT NULL,   -- the lowest document id in the connected component: stable across runs
    size           INTEGER NOT NULL,   -- documents in the cluster
    representative INTEGER NOT NULL    -- document id of the member to keep (the rule in simhash_meta)
) STRICT;

CREATE INDEX clusters_cluster ON clusters (cluster);
