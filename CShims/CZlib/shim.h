#ifndef LMDBCACHE_CZLIB_SHIM_H
#define LMDBCACHE_CZLIB_SHIM_H

/* zlib, for the tests only: records hold raw DEFLATE streams (RFC 1951), which zlib reads and
   writes with negative window bits; the tests check that zlib and the library agree both ways.
   The library itself deflates with libdeflate (CDeflate). */
#include <zlib.h>

/* deflateInit2 and inflateInit2 are macros, which Swift does not import. */
static inline int lmdbcache_raw_deflate_init(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
}

static inline int lmdbcache_raw_inflate_init(z_stream *stream) {
    return inflateInit2(stream, -15);
}

#endif
