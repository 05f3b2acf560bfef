// cache-dump: inspect, verify, export, import, compact and repair an LMDBCache directory.
// The commands live in the CacheDump target; see `cache-dump --help`. Each runs in a child
// process, so a fault reading a damaged store is reported instead of killing the tool.
import CacheDump

ChildProcessRun.run { CacheDumpCommand.main() }
