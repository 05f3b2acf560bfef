import Testing

/// Which crashes of the corruption test's reading process are LMDB's known memory faults: the
/// reports below are cut from real AddressSanitizer output (CI, 2026-11-29), their stacks kept.
@Suite("Reliability: a sanitizer report is excused only when LMDB itself made the access")
struct MemoryFaultTriageTests {
    static func outcome(_ report: String) -> CorruptionTests.CheckOutcome {
        CorruptionTests.CheckOutcome(summary: nil, status: 1, signal: nil, errors: report)
    }

    @Test("LMDB's memcmp through the sanitizer's interceptor, on a freed block, is LMDB's fault")
    func interceptedAccessByLMDB() {
        let report = """
            ==6135==ERROR: AddressSanitizer: heap-use-after-free on address 0x7dd57cc014f4 at pc 0x55e4c9954813
            READ of size 11 at 0x7dd57cc014f4 thread T1
                #0 0x55e4c9954812 in MemcmpInterceptorCommon(void*, int (*)(void const*, void const*, unsigned long), \
            void const*, void const*, unsigned long) /home/build-user/llvm-project/compiler-rt/lib/asan/../\
            sanitizer_common/sanitizer_common_interceptors.inc:849:7
                #1 0x55e4c9954afc in memcmp /home/build-user/llvm-project/compiler-rt/lib/asan/../sanitizer_common/\
            sanitizer_common_interceptors.inc:880:10
                #2 0x7fc581df2ce5  (/lib/x86_64-linux-gnu/liblmdb.so.0+0x3ce5) (BuildId: 98bfa4cbaae8f939)
                #3 0x7fc581df2721  (/lib/x86_64-linux-gnu/liblmdb.so.0+0x3721) (BuildId: 98bfa4cbaae8f939)
                #4 0x7fc581dfa617 in mdb_cursor_put (/lib/x86_64-linux-gnu/liblmdb.so.0+0xb617)

            0x7dd57cc014f4 is located 3060 bytes inside of 4032-byte region [0x7dd57cc00900,0x7dd57cc018c0)
            freed by thread T0 here:
                #0 0x55e4c99c33a6 in free /home/build-user/llvm-project/compiler-rt/lib/asan/asan_malloc_linux.cpp:51:3
                #1 0x7fc581a718bf in _swift_release_dealloc crtstuff.c
            """
        #expect(Self.outcome(report).endedByMemoryFault)
    }

    @Test("the same report from the library's own code, or a different fault class, is not excused")
    func ownCodeIsNotExcused() {
        let ownCode = """
            ==6135==ERROR: AddressSanitizer: heap-use-after-free on address 0x7dd57cc014f4 at pc 0x55e4c9954813
            READ of size 11 at 0x7dd57cc014f4 thread T1
                #0 0x55e4c9954812 in MemcmpInterceptorCommon(void*) /llvm-project/compiler-rt/lib/asan/x.inc:849:7
                #1 0x55e4c9954afc in memcmp /llvm-project/compiler-rt/lib/asan/x.inc:880:10
                #2 0x55e4ca55d2c2 in $s9LMDBCache6RecordV4read (/tmp/x/cache-test-helper+0xd882c2)
                #3 0x55e4ca5571e5 in $s9LMDBCache9DiskStoreC6lookUp (/tmp/x/cache-test-helper+0xd882c2)
                #4 0x7fc581dfa617 in mdb_get (/lib/x86_64-linux-gnu/liblmdb.so.0+0xb617)

            freed by thread T0 here:
                #0 0x55e4c99c33a6 in free /llvm-project/compiler-rt/lib/asan/asan_malloc_linux.cpp:51:3
                #1 0x7fc581df2ce5  (/lib/x86_64-linux-gnu/liblmdb.so.0+0x3ce5)
            """
        #expect(!Self.outcome(ownCode).endedByMemoryFault, "a frame deeper than the top two is not the culprit")
        let trap = "Fatal error: Index out of range\n    #0 0x7fc581df2ce5 (/lib/x86_64-linux-gnu/liblmdb.so.0+0x3ce5)"
        #expect(!Self.outcome(trap).endedByMemoryFault, "a Swift trap is never excused")
    }
}
