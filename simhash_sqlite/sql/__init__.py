"""The SQL surface for users: `simq sql`, `simq shell`, the guard that keeps their SQL off our schema,
and the sqlite-utils plugin."""
