#ifndef LMDBCACHE_BENCH_CLMDB_SHIM_H
#define LMDBCACHE_BENCH_CLMDB_SHIM_H

/* The harness's own view of LMDB, for the raw `LMDB-C` peer: the library keeps its CLMDB module to
   itself (only its Storage layer calls LMDB), so the benchmarks declare theirs. */
#include <lmdb.h>
#include <stddef.h>

static inline MDB_val bench_mdb_val(const void *data, size_t size) {
    MDB_val value;
    value.mv_size = size;
    value.mv_data = (void *)data;
    return value;
}

#endif
