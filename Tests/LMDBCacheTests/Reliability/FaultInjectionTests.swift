import CacheTestSupport
import Foundation
import LMDBCacheStorage
import Testing

@testable import LMDBCache

/// One fault: which call fails, with which error, at which of its calls.
struct InjectedFault: Sendable, CustomTestStringConvertible {
    var call: FaultInjectionLibrary.Call
    var error: Int32
    var errorName: String
    /// "N" fails the Nth call; "N+" that one and every later one.
    var occurrence: String

    var testDescription: String { "\(call.rawValue) \(errorName) at call \(occurrence)" }
}

/// How a `cache-test-helper faults` run ended.
struct FaultScenarioOutcome {
    var lines: [String]
    var status: Int32
    var signal: Int32?
    var errors: String

    /// "STEP ok" / "STEP error CASE: …" / "read hits …", one per step.
    var summary: String {
        lines.map { line in
            guard let colon = line.firstIndex(of: ":"), line.contains(" error ") else { return line }
            return String(line[..<colon])
        }.joined(separator: "; ")
    }

    /// Runs the scenario on `directory` in a helper process with `environment`.
    init(directory: TemporaryDirectory, arguments: [String] = [], environment: [String: String]? = nil) throws {
        let helper = try HelperProcess(["faults", directory.path] + arguments, environment: environment)
        var lines: [String] = []
        while let line = helper.readLine() { lines.append(line) }
        self.lines = lines
        errors = helper.errorText()
        status = helper.wait()
        signal = helper.terminatingSignal()
    }
}

@Suite("Reliability: LMDB and system calls failing at the C boundary", .serialized)
struct FaultInjectionTests {
    /// The matrix: every call the interposer reaches, with the errors it can really return.
    static let faults: [InjectedFault] = [
        // The growth of the map (the first call sets the size before the store is opened).
        InjectedFault(call: .setMapSize, error: ENOMEM, errorName: "ENOMEM", occurrence: "2"),
        InjectedFault(call: .setMapSize, error: ENOMEM, errorName: "ENOMEM", occurrence: "2+"),
        InjectedFault(call: .transactionCommit, error: EIO, errorName: "EIO", occurrence: "8"),
        InjectedFault(call: .transactionCommit, error: ENOSPC, errorName: "ENOSPC", occurrence: "8"),
        InjectedFault(call: .transactionCommit, error: EIO, errorName: "EIO", occurrence: "8+"),
        InjectedFault(
            call: .transactionBegin, error: LMDBStatus.readersFull, errorName: "MDB_READERS_FULL", occurrence: "20"),
        InjectedFault(
            call: .transactionBegin, error: LMDBStatus.readersFull, errorName: "MDB_READERS_FULL", occurrence: "20+"),
        InjectedFault(call: .environmentCopy, error: EIO, errorName: "EIO", occurrence: "1"),
        InjectedFault(call: .environmentCopy, error: ENOSPC, errorName: "ENOSPC", occurrence: "1"),
        InjectedFault(call: .rename, error: EIO, errorName: "EIO", occurrence: "1"),
        InjectedFault(call: .rename, error: EXDEV, errorName: "EXDEV", occurrence: "1"),
        InjectedFault(call: .fdatasync, error: EIO, errorName: "EIO", occurrence: "2"),  // while opening
        InjectedFault(call: .fdatasync, error: EIO, errorName: "EIO", occurrence: "10"),
        InjectedFault(call: .fdatasync, error: ENOSPC, errorName: "ENOSPC", occurrence: "10+"),
        InjectedFault(call: .statvfs, error: EIO, errorName: "EIO", occurrence: "1+"),
    ]

    /// Checks what every faulted run must show, and that the store is sound afterwards.
    static func expectContained(_ outcome: FaultScenarioOutcome, in directory: TemporaryDirectory, _ label: String)
        throws
    {
        #expect(
            outcome.signal == nil, "\(label): died of signal \(outcome.signal ?? 0): \(outcome.errors.suffix(1_500))")
        #expect(outcome.status == 0, "\(label): exit status \(outcome.status): \(outcome.errors.suffix(1_500))")
        #expect(outcome.lines.last == "done", "\(label): the scenario did not finish: \(outcome.lines)")
        #expect(!outcome.lines.contains { $0.contains(" unexpected ") }, "\(label): an error that is not a CacheError")
        let read = outcome.lines.first { $0.hasPrefix("read ") }
        #expect(read?.hasSuffix(" wrong 0") ?? true, "\(label): a wrong value was read: \(read ?? "")")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!names.contains { $0.hasPrefix("data.mdb.damaged") }, "\(label): the store was set aside")
        let problems = try StoreCheck.problems(at: directory.url)
        #expect(problems.isEmpty, "\(label): the store does not open clean: \(problems)")
    }

    @Test(
        "a failing LMDB or system call gives a clear CacheError, never a crash, and the store opens clean",
        arguments: faults)
    func failingCallIsContained(fault: InjectedFault) throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let environment = try FaultInjectionLibrary.environment(
            call: fault.call, error: fault.error, occurrence: fault.occurrence)
        let outcome = try FaultScenarioOutcome(directory: directory, environment: environment)
        #expect(
            outcome.errors.contains("inject-faults: injected \(fault.call.rawValue)"),
            "the fault was never injected: \(outcome.errors.suffix(500))")
        print("fault matrix: \(fault.testDescription) -> \(outcome.summary)")
        try Self.expectContained(outcome, in: directory, fault.testDescription)
    }

    @Test("a synchronous write that changes nothing still syncs: the commits before it are durable when it returns")
    func unchangedSynchronousWriteSyncs() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = try FaultInjectionLibrary.path()
        let helper = try HelperProcess(["noop-sync", directory.path], environment: environment)
        let line = helper.readLine()
        #expect(helper.wait() == 0, "\(helper.errorText())")
        // LMDB commits a transaction that changed nothing without syncing; the trim's commit
        // before it left its meta page unsynced, so the removal must sync, and the failing sync
        // must reach it.
        #expect(line?.hasPrefix("remove error") == true, "\(line ?? "no output")")
        #expect(helper.errorText().contains("inject-faults: injected fdatasync"), "\(helper.errorText())")
    }

    /// True in a ThreadSanitizer or AddressSanitizer build, whose shadow memory takes terabytes of
    /// address space: there an address-space limit says nothing about the map.
    static let underSanitizer = ["__tsan_init", "__asan_init"].contains { (name: String) in
        name.withCString { dlsym(nil, $0) } != nil
    }

    @Test(
        "a map that cannot grow under an address-space limit (prlimit --as): the write gets diskFull, reads keep working",
        .disabled(if: underSanitizer, "a sanitizer's shadow memory does not fit under an address-space limit"))
    func mapGrowthFailsUnderAddressSpaceLimit() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let outcome = try FaultScenarioOutcome(directory: directory, arguments: ["address-space"])
        print("address-space limit -> \(outcome.summary)")
        try #require(outcome.lines.contains { $0.hasPrefix("address space limited to ") }, "\(outcome.lines)")
        let read = try #require(outcome.lines.first { $0.hasPrefix("read ") })
        #expect(!read.hasPrefix("read hits 0 "), "values written before the failure are read back: \(read)")
        // The 4,600 values need more than the 32 MiB map. A batch that does not fit sets off an
        // emergency trim (twice its bytes) and a retry: whether the retry fits depends on how the
        // writer batched the values (a busy machine makes smaller batches), so either the write
        // gets diskFull, or it went through by evicting older values (no limit but the map's
        // evicts here: misses prove the failed growth was met).
        let evicted = read.hasPrefix("read hits") && !read.contains(" misses 0 ") && read.contains(" wrong 0")
        #expect(
            outcome.lines.contains { $0.hasPrefix("write error diskFull") }
                || (outcome.lines.contains("write ok") && evicted),
            "the write that needed a bigger map gets diskFull, or room by eviction: \(outcome.lines)")
        try Self.expectContained(outcome, in: directory, "address-space limit")
    }
}
