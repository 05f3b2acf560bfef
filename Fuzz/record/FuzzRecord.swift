// libFuzzer target: the record decoder (Record.Header, validate, value) on arbitrary bytes,
// and a round trip of the bytes as a value.
// scripts/fuzz builds it with -sanitize=fuzzer,address -DFUZZING; a plain build replays the files
// named on its command line.
import CacheTestSupport

@main
enum FuzzRecord {
    static func main() { FuzzTarget.main(testOneInput) }
}

/// libFuzzer calls this for each input (directly when its own `main` is linked).
@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTarget.run(FuzzChecks.record, data, size)
}
