#ifndef LMDBCACHE_CLMDB_SHIM_H
#define LMDBCACHE_CLMDB_SHIM_H

#include <lmdb.h>
#include <stddef.h>

/* MDB_val built from a pointer and a length (Swift cannot name the fields' C types portably). */
static inline MDB_val lmdbcache_val(const void *data, size_t size) {
    MDB_val value;
    value.mv_size = size;
    value.mv_data = (void *)data;
    return value;
}

/* Counts the reader table's slots in use (mdb_reader_list's callback cannot be a Swift closure
   that captures state, so the count is gathered here). */
static int lmdbcache_count_line(const char *msg, void *ctx) {
    (void)msg;
    *(int *)ctx += 1;
    return 0;
}

static inline int lmdbcache_reader_lines(MDB_env *env) {
    int lines = 0;
    mdb_reader_list(env, lmdbcache_count_line, &lines);
    return lines;
}

#endif
