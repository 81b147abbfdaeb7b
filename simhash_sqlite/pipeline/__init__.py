"""Jobs over many documents on top of SimhashIndex: reading inputs (files, folders, JSONL, stdin),
the streaming keep-first filter (dedup), and searches over many shard files."""
