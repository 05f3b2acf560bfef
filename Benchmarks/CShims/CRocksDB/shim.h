#ifndef LMDBCACHE_BENCH_CROCKSDB_SHIM_H
#define LMDBCACHE_BENCH_CROCKSDB_SHIM_H

/* The system's RocksDB (Debian's librocksdb-dev, 7.8 on bookworm) through its C API only, for the
   disk suite's `RocksDB` peer: the C++ API is not importable, and the C API is what other
   languages' bindings use. */
#include <rocksdb/c.h>

#endif
