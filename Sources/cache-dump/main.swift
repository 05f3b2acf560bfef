// cache-dump: inspect, verify, export, import, compact and repair an LMDBCache directory.
// The commands live in the CacheDump target; see `cache-dump --help`.
import CacheDump

CacheDumpCommand.main()
