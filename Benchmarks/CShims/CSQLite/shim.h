#ifndef LMDBCACHE_BENCH_CSQLITE_SHIM_H
#define LMDBCACHE_BENCH_CSQLITE_SHIM_H

/* The system's SQLite (Debian's libsqlite3-dev), for the disk suite's YYKVStorage-like peer. */
#include <sqlite3.h>

#endif
