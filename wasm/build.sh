#!/usr/bin/env bash
# Rebuild simhash_sqlite/web/browser/sqlite-simhash.js and .wasm: SQLite with the extension compiled in
# (-DSQLITE_CORE), for the page `simq publish` writes (docs/sql.md, "In a browser").
#
#     wasm/build.sh            # fetches better-sqlite3 12.11.1 from npm for SQLite 3.53.2's amalgamation
#     SIMHASH_SQLITE_AMALGAMATION=/path/to/sqlite3.c wasm/build.sh
#
# Needs Debian's emscripten 3.1.6 (apt-get install emscripten) and Python 3.11 (its unicodedata, Unicode
# 14.0.0, makes the core's tables: the same as the package running on Python 3.11). The same inputs give
# the same bytes: tests/test_browser.py rebuilds and compares where emcc is installed. Without zlib (no
# Emscripten port offline): pairs of two short texts are judged by their sketches (docs/sql.md).
set -euo pipefail
# Debian's emscripten runs its JS tools with node, needing Debian's node modules (acorn) on the path.
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs"
cd "$(dirname "$0")/.."
SQLITE_SHA256=60d2f39a3726cd6b9021da6f4e868608d66fbb6528a9f513dc8ffcc640493422
OUT=${1:-simhash_sqlite/web/browser}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
amalgamation=${SIMHASH_SQLITE_AMALGAMATION:-}
if [ -z "$amalgamation" ]; then
    (cd "$work" && npm pack --silent better-sqlite3@12.11.1 >/dev/null && tar xzf better-sqlite3-12.11.1.tgz)
    amalgamation="$work/package/deps/sqlite3/sqlite3.c"
fi
echo "$SQLITE_SHA256  $amalgamation" | sha256sum -c --quiet -
python3 -c 'import unicodedata, sys; v = unicodedata.unidata_version; sys.exit(0 if v == "14.0.0" else f"Unicode {v}: build with Python 3.11 (Unicode 14.0.0)")'
python3 simhash_sqlite/native/gen_unicode_tables.py "$work/_unicode_tables.h"
python3 simhash_sqlite/native/gen_rule_constants.py simhash_sqlite/core/rule.py "$work/_rule_constants.h"
cp "$amalgamation" "$work/sqlite3.c"
cp simhash_sqlite/native/vendor/sqlite/sqlite3.h "$work/sqlite3.h"
# Relative paths and a fixed working folder keep the output free of this machine's paths.
cp simhash_sqlite/native/sqlite_extension.c simhash_sqlite/native/simhash_core.c simhash_sqlite/native/*.h \
    wasm/browser_api.c "$work/"
(
    cd "$work"
    emcc -O2 -ffp-contract=off -DSQLITE_CORE -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_THREADSAFE=0 \
        -DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_OMIT_DEPRECATED -DSQLITE_DQS=0 -I. \
        sqlite3.c sqlite_extension.c simhash_core.c browser_api.c -o sqlite-simhash.js \
        -sMODULARIZE=1 -sEXPORT_NAME=SimhashSQLite -sENVIRONMENT=web -sALLOW_MEMORY_GROWTH=1 \
        -sEXPORTED_FUNCTIONS=_browser_open,_browser_query,_browser_free \
        -sEXPORTED_RUNTIME_METHODS=FS,ccall,UTF8ToString -lm
)
mkdir -p "$OUT"
cp "$work/sqlite-simhash.js" "$work/sqlite-simhash.wasm" "$OUT/"
# What the build read, so a test without emcc sees a committed build older than its C sources.
sha256sum simhash_sqlite/native/sqlite_extension.c simhash_sqlite/native/simhash_core.c simhash_sqlite/native/*.h \
    simhash_sqlite/core/rule.py simhash_sqlite/version.py wasm/browser_api.c wasm/build.sh >"$OUT/sources.sha256"
sha256sum "$OUT/sqlite-simhash.js" "$OUT/sqlite-simhash.wasm"
