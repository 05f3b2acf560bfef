import BenchmarkData
import Foundation

// Two processes sharing one store: this process and a second cache-bench process (the child,
// started with `--two-process-child`) run a YCSB-B mix on the same directory at the same time,
// as two workers of one service on one host would share a cache.
//
// The child is this executable run again. It finds its system by label in
// `DiskSystemKind.local`, regenerates the keys with `makeKeys(count:salt:)`, opens the store and
// writes `ready`; the parent then sends the start line, `start NS`: a CLOCK_MONOTONIC time 2 ms
// ahead that both processes spin until, so that neither starts late by however long the child
// takes to be woken. The parent runs its own part, reads the child's one result line and waits
// for it to exit. CLOCK_MONOTONIC is system-wide, so the child's start and end compare with the
// parent's. The child sends back every get's time, so the percentiles are over both processes'
// gets.
//
// Across processes, LMDB has one writer at a time (its writer lock lives in `lock.mdb`). LMDB-C
// holds its write transaction open for up to 1,000 puts, or until `finishWrites()`: at 5% sets
// that is up to 20,000 operations (all of a `--quick` run), and meanwhile the other process's
// next put waits in `mdb_txn_begin`. LMDBCache's writer thread holds the lock only while it
// writes and commits one batch of what was queued.

/// The salt `DiskSuite` makes its keys with (`makeKeys(count:salt:)`); the child regenerates
/// them with it, and ``timeTwoProcesses(kind:system:directory:keys:entries:payload:operations:seed:)``
/// checks that the keys it is given are those.
let diskKeySalt: UInt64 = 0xD15C

/// Runs `operations` operations in this process and `operations` in a second cache-bench
/// process at the same time, on the store of `kind` in `directory` (already filled with
/// keys[0..<entries] by `system`, which stays open in this process), each process drawing keys
/// Zipf(0.99) with its own seed and doing 95% gets, 5% sets (YCSB-B) with values from
/// `payload.pool(count: 256, seed: 7)`, then finishWrites(). Returns the aggregate: operations =
/// both processes' count, elapsedNanos = from the earlier start to the later end
/// (CLOCK_MONOTONIC is system-wide, so the child reports its start and end), misses summed,
/// batchNanos = every get's time from both processes (the child sends all its get times back).
///
/// Both processes rank keys by one Zipf permutation (seeded by `seed`), so the same keys are hot
/// in both, and draw from it with seeds of their own; each plan is generated before timing. The
/// child regenerates the keys with ``diskKeySalt``, so `keys` must be those. Its standard error
/// is passed through; a child that fails, sends a malformed line or exits non-zero is a thrown
/// error naming the system. No timeout: a child that hangs hangs the run.
func timeTwoProcesses(
    kind: DiskSystemKind, system: any DiskSystem, directory: String, keys: [[UInt8]], entries: Int, payload: Payload,
    operations: Int, seed: UInt64
) throws -> RunSample {
    guard kind.sharesAcrossProcesses else {
        throw TwoProcessFailure("\(kind.label) does not take part in the two-process workload")
    }
    guard DiskSystemKind.local.contains(where: { $0.label == kind.label }) else {
        throw TwoProcessFailure("\(kind.label) is not in DiskSystemKind.local, where the child looks for it")
    }
    guard entries > 0, keys.count >= entries, operations >= 0 else {
        throw TwoProcessFailure("\(entries) entries of \(keys.count) keys, \(operations) operations")
    }
    guard keys[..<entries].elementsEqual(makeKeys(count: entries, salt: diskKeySalt)) else {
        throw TwoProcessFailure(
            "the keys are not makeKeys(count: \(entries), salt: \(diskKeySalt)), which the child uses")
    }
    let pool = payload.pool(count: 256, seed: 7)
    let plan = TwoProcessPlan(entries: entries, operations: operations, seed: seed, process: 0)

    let child = Process()
    child.executableURL = URL(
        fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? "/proc/self/exe")
    child.arguments = TwoProcessChild.arguments(
        label: kind.label, directory: directory, entries: entries, payload: payload, operations: operations,
        seed: seed)
    let input = Pipe()
    let output = Pipe()
    child.standardInput = input
    child.standardOutput = output
    try child.run()
    defer {
        if child.isRunning {
            child.terminate()
            child.waitUntilExit()
        }
    }
    let reader = LineReader(output.fileHandleForReading.fileDescriptor)
    func nextLine(limit: Int) throws -> String? {
        do {
            return try reader.line(limit: limit)
        } catch {
            throw TwoProcessFailure("\(kind.label): \(error)")
        }
    }
    // An error naming the system, after the child has exited, with how it ended.
    func failure(_ what: String) -> TwoProcessFailure {
        try? input.fileHandleForWriting.close()
        child.waitUntilExit()
        let how =
            child.terminationReason == .uncaughtSignal
            ? "killed by signal \(child.terminationStatus)" : "exit status \(child.terminationStatus)"
        return TwoProcessFailure("\(kind.label): the second process \(what) (\(how))")
    }

    guard let ready = try nextLine(limit: 1_024) else { throw failure("ended before it was ready") }
    guard ready == "ready" else { throw failure("said \(quoted(ready)) instead of ready") }
    let startAt = nanosecondsNow() + TwoProcessChild.startDelayNanos
    guard writeIgnoringSIGPIPE(input.fileHandleForWriting.fileDescriptor, "start \(startAt)\n") else {
        throw failure("did not take the start line")
    }
    try input.fileHandleForWriting.close()
    let mine = try plan.run(on: system, keys: keys, pool: pool, at: startAt)

    // A decimal latency is at most 20 digits and a comma.
    guard let line = try nextLine(limit: 1_024 + operations * 21) else {
        throw failure("ended without a result")
    }
    child.waitUntilExit()
    guard child.terminationReason == .exit, child.terminationStatus == 0 else {
        throw failure("failed after its result")
    }
    let theirs: TwoProcessPart
    do {
        theirs = try TwoProcessPart(resultLine: line, operations: operations)
    } catch {
        throw TwoProcessFailure("\(kind.label): \(error)")
    }
    let start = min(mine.start, theirs.start)
    let end = max(mine.end, theirs.end)
    return RunSample(
        operations: 2 * operations, elapsedNanos: end - start, batchNanos: mine.getNanos + theirs.getNanos,
        batchSize: 1, misses: mine.misses + theirs.misses)
}

/// One process's operations, generated before timing.
struct TwoProcessPlan {
    /// Share of operations that are sets (YCSB-B: 95% reads, 5% updates).
    static let setShare = 0.05

    private(set) var operations: [DiskWorkloads.MixedOperation] = []

    /// Process `process`'s plan (0: the parent, 1: the child): Zipf(0.99) over `entries` keys,
    /// ranked by a permutation both processes share (seeded by `seed`), drawn with a seed of the
    /// process's own; a set stores one of 256 pool values.
    init(entries: Int, operations count: Int, seed: UInt64, process: Int) {
        let zipf = ZipfSampler(count: entries, exponent: Distribution.zipfExponent, seed: seed)
        var random = SplitMix64(seed: SplitMix64.mix(seed &+ UInt64(process + 1)))
        operations.reserveCapacity(count)
        for _ in 0..<count {
            let isSet = random.nextUnit() < Self.setShare
            let key = zipf.keyIndex(unit: random.nextUnit())
            operations.append(.init(key: key, setsValue: isSet ? Int32(random.next() % 256) : nil))
        }
    }

    /// Runs the plan on `system` as the mixes do (``DiskWorkloads/mix(_:keys:plan:pool:seconds:)``,
    /// every operation, then `finishWrites()`), from `startAt` (CLOCK_MONOTONIC nanoseconds, spun
    /// for) when given.
    func run(on system: any DiskSystem, keys: [[UInt8]], pool: [[UInt8]], at startAt: UInt64 = 0) throws
        -> TwoProcessPart
    {
        while nanosecondsNow() < startAt {}
        let start = nanosecondsNow()
        let sample = try DiskWorkloads.mix(system, keys: keys, plan: operations, pool: pool, seconds: nil)
        return TwoProcessPart(
            start: start, end: nanosecondsNow(), operations: sample.operations, misses: sample.misses,
            getNanos: sample.batchNanos)
    }
}

/// What one process's part of the workload measured.
struct TwoProcessPart {
    /// CLOCK_MONOTONIC nanoseconds at its first operation and after its `finishWrites()`.
    var start: UInt64
    var end: UInt64
    var operations: Int
    /// Gets that found nothing.
    var misses: Int
    /// Each get's time, in order.
    var getNanos: [UInt64]

    private static let tag = "two-process-result"

    /// The child's one line:
    /// `two-process-result start=NS end=NS operations=N misses=N latencies=NS,NS,...`.
    var resultLine: String {
        "\(Self.tag) start=\(start) end=\(end) operations=\(operations) misses=\(misses) latencies="
            + getNanos.map(String.init).joined(separator: ",")
    }

    /// Parses the child's line (another process's output: checked field by field), which must
    /// report `operations` operations.
    init(resultLine line: String, operations expected: Int) throws {
        let malformed = TwoProcessFailure("a malformed result from the second process: \(quoted(line))")
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 6, fields[0] == Self.tag else { throw malformed }
        func value(_ index: Int, _ name: String) throws -> Substring {
            let field = fields[index]
            guard field.hasPrefix(name + "=") else { throw malformed }
            return field.dropFirst(name.count + 1)
        }
        func number(_ text: Substring) throws -> UInt64 {
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let value = UInt64(text) else {
                throw malformed
            }
            return value
        }
        start = try number(try value(1, "start"))
        end = try number(try value(2, "end"))
        let operations = try number(try value(3, "operations"))
        let misses = try number(try value(4, "misses"))
        let latencies = try value(5, "latencies")
        getNanos =
            latencies.isEmpty ? [] : try latencies.split(separator: ",", omittingEmptySubsequences: false).map(number)
        guard start <= end, operations == UInt64(expected), getNanos.count <= expected, misses <= getNanos.count
        else { throw malformed }
        self.operations = expected
        self.misses = Int(misses)
    }

    init(start: UInt64, end: UInt64, operations: Int, misses: Int, getNanos: [UInt64]) {
        self.start = start
        self.end = end
        self.operations = operations
        self.misses = misses
        self.getNanos = getNanos
    }
}

/// The second process: `cache-bench --two-process-child --system LABEL --dir D --entries N
/// --salt S --payload P --operations M --seed S`, dispatched from the top of main.swift before
/// any output. Its standard output carries only `ready` and the result line.
enum TwoProcessChild {
    static let flag = "--two-process-child"
    /// How far ahead of sending it the start line's time is: enough for the child to be woken
    /// and read it.
    static let startDelayNanos: UInt64 = 2_000_000

    /// The child's command line (after the executable).
    static func arguments(
        label: String, directory: String, entries: Int, payload: Payload, operations: Int, seed: UInt64
    ) -> [String] {
        [
            flag, "--system", label, "--dir", directory, "--entries", "\(entries)", "--salt", "\(diskKeySalt)",
            "--payload", payload.rawValue, "--operations", "\(operations)", "--seed", "\(seed)",
        ]
    }

    /// Runs the child with the arguments after ``flag`` and exits: 0 after printing its result, 1
    /// with a message on standard error.
    static func main(_ arguments: ArraySlice<String>) -> Never {
        do {
            try run(arguments)
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("cache-bench \(flag): \(error)\n".utf8))
            exit(1)
        }
    }

    private static func run(_ arguments: ArraySlice<String>) throws {
        var values: [String: String] = [:]
        var rest = arguments
        while let name = rest.popFirst() {
            guard name.hasPrefix("--"), let value = rest.popFirst(), values[name] == nil else {
                throw TwoProcessFailure("bad arguments: \(arguments.joined(separator: " "))")
            }
            values[name] = value
        }
        func text(_ name: String) throws -> String {
            guard let value = values.removeValue(forKey: name) else { throw TwoProcessFailure("\(name) is missing") }
            return value
        }
        func number(_ name: String) throws -> UInt64 {
            let value = try text(name)
            guard let number = UInt64(value) else { throw TwoProcessFailure("\(name) \(value) is not a number") }
            return number
        }
        let label = try text("--system")
        let directory = try text("--dir")
        guard let entries = Int(exactly: try number("--entries")), entries <= 1 << 32 else {
            throw TwoProcessFailure("--entries out of range")
        }
        let salt = try number("--salt")
        let payloadName = try text("--payload")
        guard let operations = Int(exactly: try number("--operations")), operations <= 1 << 32 else {
            throw TwoProcessFailure("--operations out of range")
        }
        let seed = try number("--seed")
        guard values.isEmpty else { throw TwoProcessFailure("unknown arguments \(values.keys.sorted())") }
        guard let payload = Payload(rawValue: payloadName) else { throw TwoProcessFailure("no payload \(payloadName)") }
        guard let kind = DiskSystemKind.local.first(where: { $0.label == label && $0.sharesAcrossProcesses }) else {
            throw TwoProcessFailure("no system \(label) that shares a store across processes")
        }
        guard entries > 0 else { throw TwoProcessFailure("--entries must be positive") }

        let keys = makeKeys(count: entries, salt: salt)
        let pool = payload.pool(count: 256, seed: 7)
        let plan = TwoProcessPlan(entries: entries, operations: operations, seed: seed, process: 1)
        let system = try kind.open(directory, .standard)
        try writeAll(1, "ready\n")
        guard let line = readLine() else {
            throw TwoProcessFailure("the parent closed standard input before the start line")
        }
        let words = line.split(separator: " ", omittingEmptySubsequences: false)
        guard words.count == 2, words[0] == "start", words[1].utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            let startAt = UInt64(words[1])
        else { throw TwoProcessFailure("a malformed start line: \(quoted(line))") }
        guard startAt < nanosecondsNow() + 1_000_000_000 else {
            throw TwoProcessFailure("a start time more than a second ahead: \(quoted(line))")
        }
        let part = try plan.run(on: system, keys: keys, pool: pool, at: startAt)
        system.close()
        try writeAll(1, part.resultLine + "\n")
    }

    private static func writeAll(_ descriptor: Int32, _ text: String) throws {
        guard writeIgnoringSIGPIPE(descriptor, text) else { throw POSIXFailure("write to the parent") }
    }
}

/// A failure of the two-process workload, or of its child.
struct TwoProcessFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}

/// `text` quoted for an error message, cut to 200 characters: it came from another process.
/// (Shared with the coherence suite's reader, CoherenceReader.swift.)
func quoted(_ text: String) -> String {
    let cut = text.count > 200 ? text.prefix(200) + "... (\(text.utf8.count) bytes)" : Substring(text)
    return "\"\(cut)\""
}

/// Writes all of `text` to `descriptor`; false when it fails (the reader gone: EPIPE). SIGPIPE is
/// blocked on this thread meanwhile and a pending one taken, so a reader that has gone is an
/// error, not the death of this process.
func writeIgnoringSIGPIPE(_ descriptor: Int32, _ text: String) -> Bool {
    var pipeSignal = sigset_t()
    sigemptyset(&pipeSignal)
    sigaddset(&pipeSignal, SIGPIPE)
    var previous = sigset_t()
    pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
    defer {
        var pending = sigset_t()
        sigpending(&pending)
        if sigismember(&pending, SIGPIPE) == 1 && sigismember(&previous, SIGPIPE) == 0 {
            var zero = timespec()
            _ = sigtimedwait(&pipeSignal, nil, &zero)
        }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
    }
    return Array(text.utf8).withUnsafeBytes { bytes in
        var done = 0
        while done < bytes.count {
            let wrote = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
            if wrote < 0 && errno == EINTR { continue }
            guard wrote > 0 else { return false }
            done += wrote
        }
        return true
    }
}

/// Lines from a pipe, read with `read(2)` (no Foundation buffering to share the descriptor with).
final class LineReader {
    private let descriptor: Int32
    private var buffer: [UInt8] = []

    init(_ descriptor: Int32) { self.descriptor = descriptor }

    /// The next line without its newline, nil at the end of the stream; a line longer than
    /// `limit` bytes, the stream ending mid-line, or no line within `timeout` (when given) is an
    /// error.
    func line(limit: Int, timeout: Duration? = nil) throws -> String? {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        var scanned = 0
        while true {
            if let newline = buffer[scanned...].firstIndex(of: 10) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeFirst(newline + 1)
                return line
            }
            scanned = buffer.count
            guard buffer.count <= limit else {
                throw TwoProcessFailure("the second process sent a line longer than \(limit) bytes")
            }
            if let deadline, let timeout {
                let left = ContinuousClock.now.duration(to: deadline)
                var pending = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let (seconds, attoseconds) = left.components
                let milliseconds =
                    left <= .zero ? 0 : Int32(clamping: min(seconds, 1 << 20) * 1_000 + attoseconds / 1_000_000_000_000_000 + 1)
                let ready = poll(&pending, 1, milliseconds)
                if ready < 0 && errno == EINTR { continue }
                guard ready >= 0 else { throw POSIXFailure("poll the second process's output") }
                guard ready > 0 else { throw TwoProcessFailure("the other process sent no line within \(timeout)") }
            }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let got = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw POSIXFailure("read from the second process") }
            if got == 0 {
                guard buffer.isEmpty else {
                    throw TwoProcessFailure(
                        "the second process ended mid-line: \(quoted(String(decoding: buffer, as: UTF8.self)))")
                }
                return nil
            }
            buffer += chunk[..<got]
        }
    }
}
