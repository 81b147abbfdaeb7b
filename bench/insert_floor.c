/* The floor for add's writer (bench/writer_floor.py runs it): the same rows inserted into the same schema by a
 * C program, one prepared statement, the same upsert, the same transactions, nothing else.
 *
 *     cc -O2 -o insert_floor bench/insert_floor.c -lsqlite3
 *     insert_floor SOURCE.db TARGET.db ROWS_PER_TRANSACTION CACHE_MIB
 *
 * SOURCE.db: an index whose documents are the rows (read whole into memory first, not timed). TARGET.db: an
 * index of the same schema without documents (its search indexes dropped, as a bulk load's). Prints the
 * seconds of CPU the inserts took (user + system, from getrusage), and how many rows. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct {
    const void *data;
    int len; /* -1: NULL */
} value;

typedef struct {
    value key, hash, text, sketch, shortt;
    sqlite3_int64 fingerprint;
    int b[4];
    sqlite3_int64 length;
    int has_fingerprint, has_length;
} row;

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static value copy_column(sqlite3_stmt *s, int i)
{
    value v = {NULL, -1};
    if (sqlite3_column_type(s, i) == SQLITE_NULL)
        return v;
    const void *p = sqlite3_column_blob(s, i);
    v.len = sqlite3_column_bytes(s, i);
    void *q = malloc((size_t)v.len + 1);
    if (!q)
        exit(2);
    if (v.len)
        memcpy(q, p, (size_t)v.len);
    v.data = q;
    return v;
}

static int bind(sqlite3_stmt *s, int i, value v, int text)
{
    if (v.len < 0)
        return sqlite3_bind_null(s, i);
    return text ? sqlite3_bind_text(s, i, v.data, v.len, SQLITE_STATIC) : sqlite3_bind_blob(s, i, v.data, v.len, SQLITE_STATIC);
}

static void must(int rc, sqlite3 *db, const char *what)
{
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: insert_floor SOURCE.db TARGET.db ROWS_PER_TRANSACTION CACHE_MIB\n");
        return 2;
    }
    long per_transaction = atol(argv[3]), cache = atol(argv[4]);
    sqlite3 *src, *db;
    sqlite3_stmt *s;
    must(sqlite3_open_v2(argv[1], &src, SQLITE_OPEN_READONLY, NULL), src, "open source");
    must(sqlite3_prepare_v2(src, "SELECT key, fingerprint, b0, b1, b2, b3, length, content_hash, text, sketch, short_text "
                                 "FROM documents ORDER BY id", -1, &s, NULL), src, "select");
    size_t n = 0, cap = 1024;
    row *rows = malloc(cap * sizeof *rows);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == cap && !(rows = realloc(rows, (cap *= 2) * sizeof *rows)))
            return 2;
        row *r = &rows[n++];
        r->key = copy_column(s, 0);
        r->has_fingerprint = sqlite3_column_type(s, 1) != SQLITE_NULL;
        r->fingerprint = sqlite3_column_int64(s, 1);
        for (int k = 0; k < 4; k++)
            r->b[k] = sqlite3_column_int(s, 2 + k);
        r->has_length = sqlite3_column_type(s, 6) != SQLITE_NULL;
        r->length = sqlite3_column_int64(s, 6);
        r->hash = copy_column(s, 7);
        r->text = copy_column(s, 8);
        r->sketch = copy_column(s, 9);
        r->shortt = copy_column(s, 10);
    }
    must(rc, src, "read");
    sqlite3_finalize(s);
    sqlite3_close(src);

    must(sqlite3_open(argv[2], &db), db, "open target");
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA cache_size=-%ld", cache * 1024);
    must(sqlite3_exec(db, pragma, NULL, NULL, NULL), db, "cache");
    must(sqlite3_exec(db, "PRAGMA foreign_keys=1", NULL, NULL, NULL), db, "foreign keys");
    const char *upsert =
        "INSERT INTO documents (key, fingerprint, b0, b1, b2, b3, length, content_hash, text, sketch, short_text) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
        "fingerprint = excluded.fingerprint, b0 = excluded.b0, b1 = excluded.b1, b2 = excluded.b2, "
        "b3 = excluded.b3, length = excluded.length, content_hash = excluded.content_hash, "
        "text = excluded.text, added_at = excluded.added_at, sketch = excluded.sketch, short_text = excluded.short_text";
    must(sqlite3_prepare_v2(db, upsert, -1, &s, NULL), db, "prepare");
    double start = cpu_seconds();
    for (size_t i = 0; i < n; i++) {
        if (i % (size_t)per_transaction == 0)
            must(sqlite3_exec(db, i ? "COMMIT; BEGIN IMMEDIATE" : "BEGIN IMMEDIATE", NULL, NULL, NULL), db, "begin");
        row *r = &rows[i];
        bind(s, 1, r->key, 1);
        if (r->has_fingerprint) {
            sqlite3_bind_int64(s, 2, r->fingerprint);
            for (int k = 0; k < 4; k++)
                sqlite3_bind_int(s, 3 + k, r->b[k]);
        } else {
            for (int k = 2; k <= 6; k++)
                sqlite3_bind_null(s, k);
        }
        if (r->has_length)
            sqlite3_bind_int64(s, 7, r->length);
        else
            sqlite3_bind_null(s, 7);
        bind(s, 8, r->hash, 0);
        bind(s, 9, r->text, 1);
        bind(s, 10, r->sketch, 0);
        bind(s, 11, r->shortt, 0);
        must(sqlite3_step(s), db, "insert");
        sqlite3_reset(s);
    }
    if (n)
        must(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), db, "commit");
    double took = cpu_seconds() - start;
    sqlite3_finalize(s);
    sqlite3_close(db);
    printf("%.6f %zu %s\n", took, n, sqlite3_libversion());
    return 0;
}
