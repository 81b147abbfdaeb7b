"""The index file: opening and migrating it, the SQL functions every connection registers, the texts
behind stored keys, and its integrity check. Builds on core/; knows nothing of searching."""
