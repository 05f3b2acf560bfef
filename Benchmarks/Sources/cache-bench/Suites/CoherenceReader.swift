import CoreMetrics
import Foundation
import LMDBCache
import Synchronization

// The reader process of the coherence suite (CoherenceSuite.swift): this executable run again as
// `cache-bench --coherence-reader ...`, dispatched from the top of main.swift before anything
// else, so it bootstraps swift-metrics with its own factory (one that keeps the library's
// `lmdbcache_invalidation_lag_seconds` recordings).
//
// It opens a Cache on the writer's directory, reads every key once (promoting it to memory),
// says `ready`, and waits for `start NS WINDOW_NS` on standard input: a CLOCK_MONOTONIC time it
// spins until, and the length of the writer's schedule. Then it reads the keys in order, over and
// over, from one thread. Every value carries the sequence number of the write that stored it;
// the first read that returns a newer one for its key is stamped with CLOCK_MONOTONIC (system
// wide, so the writer's flush-return times compare with it). Gets are counted over the window
// only. With coherence on it goes on after the window until it has read every key's last write,
// or until `grace` after the parent said `done` (or closed its standard input); with coherence
// off it stops at the end of the window. Its standard output carries only `ready` and the result
// line; a value of the wrong length, of another key's write, of a write not made, or older than
// one already read for its key is an error (exit status 1, the reason on standard error).

/// The reader's side of the coherence suite's protocol.
enum CoherenceReader {
    static let flag = "--coherence-reader"
    /// How long the reader goes on looking for the last writes after the writer is done.
    static let graceNanos: UInt64 = 2_000_000_000

    /// The reader's command line (after the executable).
    static func arguments(
        directory: String, keys: Int, valueBytes: Int, base: UInt64, writes: Int, coherence: Bool
    ) -> [String] {
        [
            flag, "--dir", directory, "--keys", "\(keys)", "--value-bytes", "\(valueBytes)", "--base", "\(base)",
            "--writes", "\(writes)", "--coherence", coherence ? "on" : "off",
        ]
    }

    /// Runs the reader with the arguments after ``flag`` and exits: 0 after printing its result,
    /// 1 with a message on standard error.
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
        func number(_ name: String, max: UInt64) throws -> UInt64 {
            let value = try text(name)
            guard let number = UInt64(value), number <= max else {
                throw TwoProcessFailure("\(name) \(quoted(value)) is not a number up to \(max)")
            }
            return number
        }
        let directory = try text("--dir")
        let keyCount = Int(try number("--keys", max: 1 << 24))
        let valueBytes = Int(try number("--value-bytes", max: 1 << 20))
        let base = try number("--base", max: 1 << 48)
        let writes = Int(try number("--writes", max: 1 << 24))
        let mode = try text("--coherence")
        guard values.isEmpty else { throw TwoProcessFailure("unknown arguments \(values.keys.sorted())") }
        guard mode == "on" || mode == "off" else { throw TwoProcessFailure("--coherence on or off, not \(mode)") }
        guard keyCount > 0, valueBytes >= CoherenceValue.headerBytes, base >= UInt64(keyCount) else {
            throw TwoProcessFailure("--keys \(keyCount), --value-bytes \(valueBytes), --base \(base)")
        }
        let coherence = mode == "on"

        LagRecordings.bootstrap()
        var configuration = Cache<String, [UInt8]>.Configuration()
        configuration.coherence = coherence ? .init() : .off
        let cache = try Cache<String, [UInt8]>(
            directory: URL(fileURLWithPath: directory), configuration: configuration)
        defer { cache.close() }
        let keys = (0..<keyCount).map(CoherenceValue.key)
        let end = base + UInt64(writes)

        // Warm: every key read once (from disk, promoted), each holding a write from before `base`.
        var latest = [UInt64](repeating: 0, count: keyCount)
        for (index, key) in keys.enumerated() {
            guard let value = cache.value(forKey: key) else { throw TwoProcessFailure("\(key) is not in the store") }
            let sequence = try CoherenceValue.sequence(of: value, key: index, keys: keyCount, bytes: valueBytes)
            guard sequence < base else { throw TwoProcessFailure("\(key) already holds write \(sequence) of \(base)") }
            latest[index] = sequence
        }
        // Each key's last write of the session (nil: none), and how many are still to be read.
        var last = [UInt64?](repeating: nil, count: keyCount)
        for sequence in base..<end { last[Int(sequence % UInt64(keyCount))] = sequence }
        var remaining = last.reduce(0) { $0 + ($1 == nil ? 0 : 1) }

        try writeLine("ready")
        guard let line = readLine() else { throw TwoProcessFailure("the parent closed standard input before start") }
        let words = line.split(separator: " ", omittingEmptySubsequences: false)
        guard words.count == 3, words[0] == "start", let startAt = UInt64(words[1]), let window = UInt64(words[2]),
            startAt < nanosecondsNow() + 1_000_000_000, window <= 3_600_000_000_000
        else { throw TwoProcessFailure("a malformed start line: \(quoted(line))") }
        // The parent's `done` line, or the end of standard input: when it came.
        let done = DoneTime()
        let listener = Thread {
            while let line = readLine(), line != "done" {}
            done.time.store(nanosecondsNow(), ordering: .releasing)
        }
        listener.start()

        var firstSeen = [UInt64](repeating: 0, count: writes)
        var sweeps: [UInt64] = []
        sweeps.reserveCapacity(Int(window / 50_000) + 16)
        var gets = 0
        var misses = 0
        while nanosecondsNow() < startAt {}
        let start = nanosecondsNow()
        let threadStart = cpuNanoseconds(CLOCK_THREAD_CPUTIME_ID)
        let processStart = cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
        let windowEnd = start + window
        var countedEnd = start
        var counting = true
        // The CPU time over the window and the sweep that ends past it, and that sweep's gets.
        var cpu = (gets: 0, thread: UInt64(0), process: UInt64(0), wall: UInt64(0))
        while true {
            let sweepStart = nanosecondsNow()
            for index in 0..<keyCount {
                guard let value = cache.value(forKey: keys[index]) else {
                    misses += 1
                    continue
                }
                let sequence = try CoherenceValue.sequence(of: value, key: index, keys: keyCount, bytes: valueBytes)
                if sequence != latest[index] {
                    guard sequence > latest[index], sequence < end else {
                        throw TwoProcessFailure(
                            "\(keys[index]) returned write \(sequence) after write \(latest[index]) (writes end at \(end))"
                        )
                    }
                    latest[index] = sequence
                    if sequence >= base {
                        firstSeen[Int(sequence - base)] = nanosecondsNow()
                        if sequence == last[index] { remaining -= 1 }
                    }
                }
            }
            let sweepEnd = nanosecondsNow()
            if counting {
                if sweepEnd <= windowEnd {
                    sweeps.append(sweepEnd - sweepStart)
                    gets += keyCount
                    countedEnd = sweepEnd
                } else {
                    counting = false
                    cpu = (
                        gets + keyCount, cpuNanoseconds(CLOCK_THREAD_CPUTIME_ID) - threadStart,
                        cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID) - processStart, sweepEnd - start
                    )
                    if !coherence { break }
                }
            }
            if !counting && remaining == 0 { break }
            let doneAt = done.time.load(ordering: .acquiring)
            if !counting && doneAt != 0 && sweepEnd > doneAt + graceNanos { break }
        }
        let statistics = cache.statistics
        let result = CoherenceReaderResult(
            start: start, end: countedEnd, gets: gets, misses: misses, remaining: remaining,
            received: statistics.invalidationsReceived, applied: statistics.invalidationsApplied,
            drops: statistics.memoryTierDrops, cpuGets: cpu.gets, threadCPUNanos: cpu.thread,
            processCPUNanos: cpu.process, cpuWallNanos: cpu.wall, sweepNanos: sweeps, firstSeen: firstSeen,
            lagNanos: LagRecordings.all)
        try writeLine(result.line)
    }

    /// CPU time of this thread or process (`CLOCK_THREAD_CPUTIME_ID`, `CLOCK_PROCESS_CPUTIME_ID`).
    private static func cpuNanoseconds(_ clock: clockid_t) -> UInt64 {
        var time = timespec()
        clock_gettime(clock, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    private static func writeLine(_ text: String) throws {
        guard writeIgnoringSIGPIPE(1, text + "\n") else { throw POSIXFailure("write to the parent") }
    }
}

/// When the parent said the writer is done (CLOCK_MONOTONIC nanoseconds; 0: not yet).
private final class DoneTime: Sendable {
    let time = Atomic<UInt64>(0)
}

/// The values the coherence suite writes: the write's sequence number and the writer's
/// CLOCK_MONOTONIC time at its insert (8 bytes each, little-endian), then filler to the size.
enum CoherenceValue {
    static let headerBytes = 16

    static func key(_ index: Int) -> String { "item:\(index)" }

    /// Write `sequence`'s value (to key `sequence % keys`), `bytes` long.
    static func make(sequence: UInt64, insertedAt: UInt64, bytes: Int) -> [UInt8] {
        var value = [UInt8](repeating: 0x2E, count: bytes)
        for index in 0..<8 {
            value[index] = UInt8(truncatingIfNeeded: sequence >> UInt64(8 * index))
            value[8 + index] = UInt8(truncatingIfNeeded: insertedAt >> UInt64(8 * index))
        }
        return value
    }

    /// The sequence number a value read for key `key` carries; a value of another length or of
    /// another key's write is an error.
    @inline(__always)
    static func sequence(of value: [UInt8], key: Int, keys: Int, bytes: Int) throws -> UInt64 {
        guard value.count == bytes else {
            throw TwoProcessFailure("\(Self.key(key)) returned \(value.count) bytes, not \(bytes)")
        }
        let sequence = value.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
        guard sequence % UInt64(keys) == UInt64(key) else {
            throw TwoProcessFailure(
                "\(Self.key(key)) returned write \(sequence), which was to \(Self.key(Int(sequence % UInt64(keys))))")
        }
        return sequence
    }
}

/// What the reader measured, as its one result line:
/// `coherence-result start=NS end=NS gets=N misses=N remaining=N received=N applied=N drops=N
/// cpugets=N threadcpu=NS processcpu=NS cpuwall=NS sweeps=NS,... seen=NS,... lags=NS,...`.
struct CoherenceReaderResult {
    /// CLOCK_MONOTONIC nanoseconds of the first get and the end of the last sweep in the window.
    var start: UInt64
    var end: UInt64
    /// Gets in the window, and those that found nothing.
    var gets: Int
    var misses: Int
    /// Keys whose last write of the session the reader never read.
    var remaining: Int
    /// The cache's ``CacheStatistics`` at the end: changes received and memory entries dropped,
    /// and whole-tier drops.
    var received: Int
    var applied: Int
    var drops: Int
    /// Gets from the start through the sweep that ended past the window, the reading thread's
    /// and the whole process's CPU time over them, and their wall-clock time.
    var cpuGets: Int
    var threadCPUNanos: UInt64
    var processCPUNanos: UInt64
    var cpuWallNanos: UInt64
    /// Each sweep's time (one get of every key), in the window.
    var sweepNanos: [UInt64]
    /// Per write of the session, in order: when a read first returned it (CLOCK_MONOTONIC
    /// nanoseconds), 0 if none did.
    var firstSeen: [UInt64]
    /// Every `lmdbcache_invalidation_lag_seconds` recording, nanoseconds.
    var lagNanos: [UInt64]

    private static let tag = "coherence-result"
    private static let names = [
        "start", "end", "gets", "misses", "remaining", "received", "applied", "drops", "cpugets", "threadcpu",
        "processcpu", "cpuwall", "sweeps", "seen", "lags",
    ]

    var line: String {
        func list(_ values: [UInt64]) -> String { values.map(String.init).joined(separator: ",") }
        let fields: [String] = [
            "\(start)", "\(end)", "\(gets)", "\(misses)", "\(remaining)", "\(received)", "\(applied)", "\(drops)",
            "\(cpuGets)", "\(threadCPUNanos)", "\(processCPUNanos)", "\(cpuWallNanos)", list(sweepNanos),
            list(firstSeen), list(lagNanos),
        ]
        return ([Self.tag] + zip(Self.names, fields).map { "\($0)=\($1)" }).joined(separator: " ")
    }

    init(
        start: UInt64, end: UInt64, gets: Int, misses: Int, remaining: Int, received: Int, applied: Int, drops: Int,
        cpuGets: Int, threadCPUNanos: UInt64, processCPUNanos: UInt64, cpuWallNanos: UInt64, sweepNanos: [UInt64],
        firstSeen: [UInt64], lagNanos: [UInt64]
    ) {
        self.start = start
        self.end = end
        self.gets = gets
        self.misses = misses
        self.remaining = remaining
        self.received = received
        self.applied = applied
        self.drops = drops
        self.cpuGets = cpuGets
        self.threadCPUNanos = threadCPUNanos
        self.processCPUNanos = processCPUNanos
        self.cpuWallNanos = cpuWallNanos
        self.sweepNanos = sweepNanos
        self.firstSeen = firstSeen
        self.lagNanos = lagNanos
    }

    /// Parses the reader's line (another process's output: checked field by field), which must
    /// report on `writes` writes of `keys` keys.
    init(line: String, writes: Int, keys: Int) throws {
        let malformed = TwoProcessFailure("a malformed result from the reader: \(quoted(line))")
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == Self.names.count + 1, fields[0] == Self.tag else { throw malformed }
        var values: [Substring] = []
        for (field, name) in zip(fields.dropFirst(), Self.names) {
            guard field.hasPrefix(name + "=") else { throw malformed }
            values.append(field.dropFirst(name.count + 1))
        }
        func number(_ text: Substring) throws -> UInt64 {
            guard !text.isEmpty, text.utf8.count <= 20, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                let value = UInt64(text)
            else { throw malformed }
            return value
        }
        func count(_ text: Substring) throws -> Int {
            let value = try number(text)
            guard value <= 1 << 40 else { throw malformed }
            return Int(value)
        }
        func list(_ text: Substring) throws -> [UInt64] {
            text.isEmpty ? [] : try text.split(separator: ",", omittingEmptySubsequences: false).map(number)
        }
        start = try number(values[0])
        end = try number(values[1])
        gets = try count(values[2])
        misses = try count(values[3])
        remaining = try count(values[4])
        received = try count(values[5])
        applied = try count(values[6])
        drops = try count(values[7])
        cpuGets = try count(values[8])
        threadCPUNanos = try number(values[9])
        processCPUNanos = try number(values[10])
        cpuWallNanos = try number(values[11])
        sweepNanos = try list(values[12])
        firstSeen = try list(values[13])
        lagNanos = try list(values[14])
        guard start <= end, gets == sweepNanos.count * keys, misses <= gets, remaining <= min(keys, writes),
            firstSeen.count == writes, cpuGets == gets + keys, threadCPUNanos > 0,
            cpuWallNanos > 0
        else { throw malformed }
    }
}

/// The reader's swift-metrics backend: keeps every recording of the library's
/// `lmdbcache_invalidation_lag_seconds` timer; every other metric is a no-op.
enum LagRecordings {
    static let label = "lmdbcache_invalidation_lag_seconds"
    fileprivate static let recordings = Mutex<[UInt64]>([])

    /// Installs the factory; once per process, before the cache opens.
    static func bootstrap() {
        MetricsSystem.bootstrap(LagFactory())
    }

    /// Every recording so far, nanoseconds (negative ones as 0).
    static var all: [UInt64] { recordings.withLock { $0 } }
}

private struct LagFactory: MetricsFactory {
    func makeCounter(label: String, dimensions: [(String, String)]) -> CounterHandler {
        NOOPMetricsHandler.instance
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> RecorderHandler {
        NOOPMetricsHandler.instance
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> TimerHandler {
        label == LagRecordings.label ? LagTimer() : NOOPMetricsHandler.instance
    }

    func destroyCounter(_ handler: CounterHandler) {}
    func destroyRecorder(_ handler: RecorderHandler) {}
    func destroyTimer(_ handler: TimerHandler) {}
}

private final class LagTimer: TimerHandler, Sendable {
    func recordNanoseconds(_ duration: Int64) {
        LagRecordings.recordings.withLock { $0.append(UInt64(max(duration, 0))) }
    }
}
