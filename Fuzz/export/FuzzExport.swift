// libFuzzer target: cache-dump's export-file parser (ExportFormat.parseHeader and parseEntry) on
// arbitrary lines.
// scripts/fuzz builds it with -sanitize=fuzzer,address -DFUZZING; a plain build replays the files
// named on its command line.
import CacheTestSupport

@main
enum FuzzExport {
    static func main() { FuzzTarget.main(testOneInput) }
}

/// libFuzzer calls this for each input (directly when its own `main` is linked).
@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTarget.run(FuzzChecks.exportLine, data, size)
}
