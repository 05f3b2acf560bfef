// libFuzzer target: the key codec (StorageKey, and init?(cacheKeyBytes:) of String, Int, UUID and
// [UInt8]) on arbitrary bytes.
// scripts/fuzz builds it with -sanitize=fuzzer,address -DFUZZING; a plain build replays the files
// named on its command line.
import CacheTestSupport

@main
enum FuzzKey {
    static func main() { FuzzTarget.main(testOneInput) }
}

/// libFuzzer calls this for each input (directly when its own `main` is linked).
@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTarget.run(FuzzChecks.key, data, size)
}
