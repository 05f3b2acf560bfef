#ifndef LMDBCACHE_CDEFLATE_SHIM_H
#define LMDBCACHE_CDEFLATE_SHIM_H

/* libdeflate: raw DEFLATE (RFC 1951, the format zlib writes with negative window bits) and
   crc32, whole buffer at a time. Records carry their own length and crc32, so no zlib or gzip
   wrapper. */
#include <libdeflate.h>

#endif
