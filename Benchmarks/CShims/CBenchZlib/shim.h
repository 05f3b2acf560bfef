#ifndef LMDBCACHE_BENCH_CZLIB_SHIM_H
#define LMDBCACHE_BENCH_CZLIB_SHIM_H

/* The harness's own view of zlib: gzopen/gzread for gzip-compressed traces, and raw deflate and
   inflate streams for the compression micro-benchmarks (the library's own zlib code is internal). */
#include <zlib.h>

/* deflateInit2 and inflateInit2 are macros, which Swift does not import. Raw deflate (negative
   window bits), level and memory level as the library uses them. */
static inline int bench_deflate_init(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
}

static inline int bench_inflate_init(z_stream *stream) {
    return inflateInit2(stream, -15);
}

#endif
