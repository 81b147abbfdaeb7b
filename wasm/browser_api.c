/* The browser's face of SQLite compiled to WebAssembly with the extension built in (SQLITE_CORE): open
 * one index file from Emscripten's in-memory file system, read-only, and run one statement with three
 * bound arguments, giving back its first column of the first row (the page asks for one JSON text).
 * Built by wasm/build.sh into simhash_sqlite/web/browser/sqlite-simhash.{js,wasm}. */
#include <stdio.h>
#include <string.h>

#include <emscripten.h>

#include "sqlite3.h"

int sqlite3_simhash_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

static sqlite3 *db;

/* NULL when opened, else why not (valid until the next call). The file is opened immutable: a WAL index
 * is read as it was when copied, with no -wal or -shm file and no locks. */
EMSCRIPTEN_KEEPALIVE const char *browser_open(const char *path) {
    static char why[512];
    if (db) sqlite3_close(db);
    db = NULL;
    sqlite3_auto_extension((void (*)(void))sqlite3_simhash_init); /* once: a second call is a no-op */
    char *uri = sqlite3_mprintf("file:%s?immutable=1", path);
    int rc = uri ? sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) : SQLITE_NOMEM;
    sqlite3_free(uri);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "SELECT count(*) FROM documents", NULL, NULL, NULL);
    if (rc == SQLITE_OK) return NULL;
    snprintf(why, sizeof why, "%s", db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    db = NULL;
    return why;
}

/* "ok\n" + the first column of the first row (empty without rows), or "error\n" + SQLite's message.
 * ?1 is bound as text, ?2 and ?3 as integers. Free with browser_free. */
EMSCRIPTEN_KEEPALIVE char *browser_query(const char *sql, const char *text, int k, int checked) {
    if (!db) return sqlite3_mprintf("error\nno index is open");
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(stmt, 1, text, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(stmt, 2, k);
        sqlite3_bind_int(stmt, 3, checked);
        rc = sqlite3_step(stmt);
    }
    char *out;
    if (rc == SQLITE_ROW) {
        const unsigned char *value = sqlite3_column_text(stmt, 0);
        out = sqlite3_mprintf("ok\n%s", value ? (const char *)value : "");
    } else if (rc == SQLITE_DONE) {
        out = sqlite3_mprintf("ok\n");
    } else {
        out = sqlite3_mprintf("error\n%s", sqlite3_errmsg(db));
    }
    sqlite3_finalize(stmt);
    return out;
}

EMSCRIPTEN_KEEPALIVE void browser_free(char *p) { sqlite3_free(p); }
