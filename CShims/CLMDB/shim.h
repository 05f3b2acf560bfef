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

#endif
