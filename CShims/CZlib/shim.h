#ifndef LMDBCACHE_CZLIB_SHIM_H
#define LMDBCACHE_CZLIB_SHIM_H

#include <zlib.h>

/* deflateInit2 and inflateInit2 are macros; Swift imports neither. Raw deflate (negative window
   bits): the record carries its own length and crc32, so zlib's header and adler32 are waste. */
static inline int lmdbcache_deflate_init(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
}

static inline int lmdbcache_inflate_init(z_stream *stream) {
    return inflateInit2(stream, -15);
}

#endif
