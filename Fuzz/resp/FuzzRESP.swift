// libFuzzer target: the RESP reply parser on arbitrary bytes delivered in chunks, and the round trips
// of values and commands through the encoder.
// scripts/fuzz builds it with -sanitize=fuzzer,address -DFUZZING; a plain build replays the files
// named on its command line.
import CacheTestSupport

@main
enum FuzzRESP {
    static func main() { FuzzTarget.main(testOneInput) }
}

/// libFuzzer calls this for each input (directly when its own `main` is linked).
@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTarget.run(FuzzChecks.resp, data, size)
}
