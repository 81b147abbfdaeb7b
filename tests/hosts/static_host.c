/* A host with SQLite compiled in (the amalgamation, sqlite3.c) and the extension compiled into it with
 * -DSQLITE_CORE: no loading at all (tests/test_hosts.py). Runs the SQL script on stdin against the index
 * argv[1], opened read-only, and prints each row with its columns tab-separated (reals with %.17g, NULL as
 * \N), as the stock shell's `.mode tabs` prints them. */
#include <stdio.h>
#include <stdlib.h>

#include "sqlite3.h"

int sqlite3_simhash_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s INDEX < script.sql\n", argv[0]);
        return 2;
    }
    if (sqlite3_auto_extension((void (*)(void))sqlite3_simhash_init) != SQLITE_OK) return 1;
    size_t cap = 1 << 16, n = 0, got;
    char *sql = malloc(cap);
    while (sql && (got = fread(sql + n, 1, cap - n - 1, stdin)) > 0) {
        n += got;
        if (n + 1 >= cap) sql = realloc(sql, cap *= 2);
    }
    if (!sql) return 1;
    sql[n] = 0;
    sqlite3 *db;
    if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fprintf(stderr, "error: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    const char *tail = sql;
    while (*tail) {
        sqlite3_stmt *stmt = NULL;
        if (sqlite3_prepare_v2(db, tail, -1, &stmt, &tail) != SQLITE_OK) {
            fprintf(stderr, "error: %s\n", sqlite3_errmsg(db));
            return 1;
        }
        if (!stmt) continue; /* white space or a comment */
        int rc;
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
            for (int i = 0; i < sqlite3_column_count(stmt); i++) {
                if (i) putchar('\t');
                switch (sqlite3_column_type(stmt, i)) {
                case SQLITE_NULL: fputs("\\N", stdout); break;
                case SQLITE_INTEGER: printf("%lld", (long long)sqlite3_column_int64(stmt, i)); break;
                case SQLITE_FLOAT: printf("%.17g", sqlite3_column_double(stmt, i)); break;
                default: fwrite(sqlite3_column_text(stmt, i), 1, (size_t)sqlite3_column_bytes(stmt, i), stdout);
                }
            }
            putchar('\n');
        }
        if (rc != SQLITE_DONE) {
            fprintf(stderr, "error: %s\n", sqlite3_errmsg(db));
            return 1;
        }
        sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
    free(sql);
    return 0;
}
