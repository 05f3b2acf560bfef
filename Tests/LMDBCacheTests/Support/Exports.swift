@_exported import CacheTestSupport
