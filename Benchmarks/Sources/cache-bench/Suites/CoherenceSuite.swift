import BenchmarkData
import Foundation
import LMDBCache

// The coherence suite: two processes share one cache directory. This process writes (a batch of
// five inserts and a flush() every 10 ms, keys in turn), a second cache-bench process reads every
// key in a loop from its memory tier (CoherenceReader.swift). Per round one reader session
// follows the change log (the default, every 5 ms) and one does not, in a seeded order, each
// against the same writer schedule. It reports:
//
// - the reader's gets per second with the change log followed and not (the rows), and their
//   ratio;
// - the staleness window: for every write, from the writer's insert and from its flush()
//   returning to the reader's first get that returns it (CLOCK_MONOTONIC in both processes,
//   system-wide); the commit readers see lies between the two. Beside them the library's own
//   `lmdbcache_invalidation_lag_seconds` as the reader recorded it;
// - what removeAll(taggedWith:) costs per entry (TagRemovalSection.swift).
//
// A key whose last write a reader following the log never returns, within 2 s of the writer's
// end, fails the run: the memory tier would be serving a replaced value past the bound. So does a
// get that returns an older write of a key after a newer one, or another key's value.

struct CoherenceSuite: Suite {
    let name = "coherence"

    /// Keys the writer overwrites in turn; the reader reads them all in every sweep.
    static let keyCount = 1_000
    static let valueBytes = 100
    /// A batch of inserts and one flush() this often: 500 writes per second.
    static let batchIntervalNanos: UInt64 = 10_000_000
    static let writesPerBatch = 5

    func run(options: Options, log: (String) -> Void) throws -> SuiteReport {
        let window: UInt64 = options.quick ? 400_000_000 : 3_000_000_000
        let writes = Int(window / Self.batchIntervalNanos) * Self.writesPerBatch
        let rounds = options.repeats()
        let seconds = format(Double(window) / 1e9, decimals: 1)
        let directory = "\(options.scratchDirectory)/cache-bench-coherence-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The writer reads nothing: it does not follow the log (its changes are logged all the same).
        var configuration = Cache<String, [UInt8]>.Configuration()
        configuration.coherence = .off
        let writer = try Cache<String, [UInt8]>(
            directory: URL(fileURLWithPath: directory), configuration: configuration)
        defer { writer.close() }
        let keys = (0..<Self.keyCount).map(CoherenceValue.key)
        for index in 0..<Self.keyCount {
            writer.insert(
                CoherenceValue.make(sequence: UInt64(index), insertedAt: nanosecondsNow(), bytes: Self.valueBytes),
                forKey: keys[index])
        }
        try writer.flush()

        var next = UInt64(Self.keyCount)
        var totals = CoherenceTotals()
        // Per configuration, per round: gets per second of the reading thread's CPU time, and the
        // CPU time per second of the reader's other threads (the change follower, timers).
        var cpuRates: [[Double]] = [[], []]
        var otherCPU: [[Double]] = [[], []]
        let variants = ["coherence 5 ms", "coherence off"]
        log("coherence: \(rounds) rounds of two reader sessions of \(seconds) s")
        let samples = try interleavedRounds(
            systems: 2, rounds: rounds, seed: options.seed, salt: workloadSalt("coherence")
        ) { variant, round in
            let follows = variant == 0
            let session = try CoherenceSession(
                writer: writer, keys: keys, directory: directory, base: next, writes: writes, window: window,
                coherence: follows)
            next += UInt64(writes)
            totals.add(session, follows: follows)
            let result = session.result
            cpuRates[variant].append(Double(result.cpuGets) / (Double(result.threadCPUNanos) / 1e9))
            otherCPU[variant].append(
                Double(result.processCPUNanos - min(result.threadCPUNanos, result.processCPUNanos))
                    / Double(result.cpuWallNanos))
            // Sweeps of 1,000 gets that took over 1 ms: the reader descheduled, or waiting.
            let stalls = session.result.sweepNanos.filter { $0 > 1_000_000 }
            log(
                "coherence: round \(round + 1), \(variants[variant]): "
                    + "\(formatRate(session.sample.operationsPerSecond)) gets/s, "
                    + "\(stalls.count) sweeps over 1 ms (\(formatNanoseconds(Double(stalls.reduce(0, +)))))"
                    + (follows
                        ? ", flush to read p50 \(formatSignedMilliseconds(session.fromFlush.median))"
                            + ", insert to read p50 \(formatSignedMilliseconds(session.fromInsert.median))" : ""))
            return session.sample
        }
        // The follower's cost when nothing changes: one session following the log, no writes.
        let idle = try CoherenceSession(
            writer: writer, keys: keys, directory: directory, base: next, writes: 0, window: window, coherence: true
        ).result
        let idleCPU =
            Double(idle.processCPUNanos - min(idle.threadCPUNanos, idle.processCPUNanos)) / Double(idle.cpuWallNanos)
        log("coherence: no writes, following: other threads \(format(idleCPU * 1e3, decimals: 2)) ms of CPU per second")
        var rows = zip(samples, [nil, "coherence off"]).map { runs, variant in
            summarize(
                suite: name, system: "LMDBCache", variant: variant, workload: "get, another process writing",
                threads: 1, valueBytes: Self.valueBytes, runs: runs)
        }
        rows.computeRatios()
        let perRound = zip(samples[0], samples[1]).map { on, off in
            on.operationsPerSecond / max(off.operationsPerSecond, 1)
        }
        let perRoundCPU = zip(cpuRates[0], cpuRates[1]).map { on, off in on / max(off, 1) }

        let measures: [(label: String, workload: String, values: [Int64], unread: String)] = [
            (
                "insert in the writer -> first get returning it in the reader (upper bound)",
                "staleness: insert to first read", totals.fromInsert.sorted(), "\(totals.unread)"
            ),
            (
                "flush() returned in the writer -> first get returning it in the reader (lower bound)",
                "staleness: flush return to first read", totals.fromFlush.sorted(), "\(totals.unread)"
            ),
            (
                "lmdbcache_invalidation_lag_seconds recorded by the reader (see the notes)",
                "invalidation lag metric", totals.lags.sorted(), ""
            ),
        ]
        let stalenessTable = ExtraTable(
            title: "Staleness window (reader following the change log every 5 ms)",
            header: ["measure", "samples", "p50", "p99", "max", "not read"], rightAligned: [1, 2, 3, 4, 5],
            rows: measures.map { measure in
                [
                    measure.label, "\(measure.values.count)", formatSignedMilliseconds(measure.values.percentile(0.50)),
                    formatSignedMilliseconds(measure.values.percentile(0.99)),
                    formatSignedMilliseconds(measure.values.last ?? 0), measure.unread,
                ]
            })
        let stalenessRows = measures.map { measure in
            var row = ResultRow(
                suite: name, system: "LMDBCache", workload: measure.workload, threads: 1, valueBytes: Self.valueBytes,
                opsPerSecond: 0, p50Nanoseconds: Double(measure.values.percentile(0.50)),
                p99Nanoseconds: Double(measure.values.percentile(0.99)))
            row.calls = measure.values.count
            return row
        }

        let tags = try TagRemovalSection(quick: options.quick).run(options: options, log: log)
        let achieved = Double(totals.writes) / (Double(max(totals.writerNanos, 1)) / 1e9)
        let flushes = totals.flushNanos.sorted()
        let interval = format(Double(Self.batchIntervalNanos) / 1e6, decimals: 0)
        let planned = UInt64(Self.writesPerBatch) * 1_000_000_000 / Self.batchIntervalNanos
        return SuiteReport(
            suite: name,
            parameters: [
                (
                    "cache",
                    "Cache<String, [UInt8]> in its default configuration, one directory, two processes; the reader "
                        + "follows the change log every 5 ms (the default) or not (.off); the writer does not"
                ),
                (
                    "keys",
                    "\(Self.keyCount) keys (item:0 ... item:\(Self.keyCount - 1)), \(Self.valueBytes) B values carrying "
                        + "the write's sequence number; the reader reads every key once (promoting it) before timing"
                ),
                (
                    "writer",
                    "this process: \(Self.writesPerBatch) inserts then flush() every \(interval) ms, keys in turn "
                        + "(\(planned) writes/s planned, \(format(achieved, decimals: 0)) achieved); flush() p50 "
                        + "\(formatNanoseconds(Double(flushes.percentile(0.5)))), "
                        + "p99 \(formatNanoseconds(Double(flushes.percentile(0.99))))"
                ),
                (
                    "reader",
                    "a second process (cache-bench \(CoherenceReader.flag)), one thread getting every key in turn, "
                        + "over and over; \(writes) writes (\(seconds) s) per session, \(rounds) rounds of one session "
                        + "per configuration, each round in a seeded order"
                ),
                (
                    "gets/s, following / not following",
                    "\(format(perRound.median, decimals: 3))x (per round \(format(perRound.min() ?? 0, decimals: 3))"
                        + "-\(format(perRound.max() ?? 0, decimals: 3)))"
                ),
                (
                    "reader CPU",
                    "gets per second of the reading thread's CPU time: following \(formatRate(cpuRates[0].median)), "
                        + "not following \(formatRate(cpuRates[1].median)), ratio \(format(perRoundCPU.median, decimals: 3))x "
                        + "(per round \(format(perRoundCPU.min() ?? 0, decimals: 3))-\(format(perRoundCPU.max() ?? 0, decimals: 3))); "
                        + "the reader's other threads (change follower, timers) used "
                        + "\(format(otherCPU[0].median * 1e3, decimals: 2)) ms of CPU per second following, "
                        + "\(format(otherCPU[1].median * 1e3, decimals: 2)) not, \(format(idleCPU * 1e3, decimals: 2)) "
                        + "following with no writes (one more session)"
                ),
                (
                    "invalidations",
                    "received \(totals.received), applied \(totals.applied), memory tier drops \(totals.drops) "
                        + "(sessions following the log; \(totals.followedWrites) writes)"
                ),
                (
                    "not following",
                    "\(totals.readWithoutFollowing) of \(totals.unfollowedWrites) writes ever returned by the reader "
                        + "(its memory tier serves the value it read first)"
                ),
            ] + tags.parameters,
            notes: [
                "ops/s: the reader's gets per second over the writer's schedule (\(seconds) s), median over the "
                    + "rounds; min-max: the rounds' range; vs LMDBCache: per round, over the session following the "
                    + "log. p50/p99: per get, estimated from the time of each sweep over all \(Self.keyCount) keys "
                    + "(gets that returned a new value, read from disk, included). Wall-clock rates count the time the "
                    + "reader was descheduled (sweeps over 1 ms, in the progress lines); 'reader CPU' divides by the "
                    + "reading thread's CPU time instead (CLOCK_THREAD_CPUTIME_ID), which a busy machine does not "
                    + "inflate, and gives the CPU the follower costs the reader's process.",
                "Staleness: for each write, the reader's CLOCK_MONOTONIC time at its first get that returned it, minus "
                    + "the writer's at its insert (first row) or at the return of the flush() after its batch (second "
                    + "row); CLOCK_MONOTONIC is system-wide. The commit that makes a write visible falls between the "
                    + "two: flush() commits what is queued, then syncs the file once more before it returns, so a "
                    + "negative figure in the second row is a write the reader had before the writer's flush() "
                    + "returned. Both include the reader's wait for its next sweep to reach the key (a sweep: the p50 "
                    + "get time x \(Self.keyCount)). 'not read': writes replaced before the reader got them.",
                "Third row: the library's lmdbcache_invalidation_lag_seconds timer as the reader recorded it (a "
                    + "swift-metrics factory of its own): whole milliseconds from the wall clock at the writing "
                    + "transaction to the wall clock when the follower applied the change (both the precise "
                    + "CLOCK_REALTIME): the commit's fsync and the reader's next sweep are not in it.",
                "A session following the log fails the run if the reader has not returned every key's last write "
                    + "\(CoherenceReader.graceNanos / 1_000_000_000) s after the writer's end, or ever returns an "
                    + "older write of a key after a newer one.",
            ] + tags.notes,
            rows: rows, extraTables: [stalenessTable, tags.table], extraRows: stalenessRows + tags.rows)
    }
}

/// What the suite adds up over the sessions.
private struct CoherenceTotals {
    var fromInsert: [Int64] = []
    var fromFlush: [Int64] = []
    var lags: [Int64] = []
    var unread = 0
    var received = 0
    var applied = 0
    var drops = 0
    var followedWrites = 0
    var unfollowedWrites = 0
    var readWithoutFollowing = 0
    var writes = 0
    var writerNanos: UInt64 = 0
    var flushNanos: [UInt64] = []

    mutating func add(_ session: CoherenceSession, follows: Bool) {
        let writes = session.result.firstSeen.count
        self.writes += writes
        writerNanos += session.writerNanos
        flushNanos += session.flushNanos
        if follows {
            fromInsert += session.fromInsert
            fromFlush += session.fromFlush
            lags += session.result.lagNanos.map { Int64(clamping: $0) }
            unread += session.unread
            received += session.result.received
            applied += session.result.applied
            drops += session.result.drops
            followedWrites += writes
        } else {
            unfollowedWrites += writes
            readWithoutFollowing += session.result.firstSeen.count { $0 != 0 }
        }
    }
}

/// One reader session: a reader process started on `directory`, and this process writing
/// `writes` writes on the writer's schedule from the shared start time.
struct CoherenceSession {
    /// The reader's measurements.
    var result: CoherenceReaderResult
    /// The reader's gets in the window, as a run.
    var sample: RunSample
    /// Each flush()'s time.
    var flushNanos: [UInt64]
    /// From the first insert to the last flush()'s return.
    var writerNanos: UInt64
    /// Per write the reader returned: its first return minus the writer's insert, and minus the
    /// return of the flush() after it (may be negative).
    var fromInsert: [Int64]
    var fromFlush: [Int64]
    /// Writes the reader never returned (their key written again first).
    var unread: Int

    init(
        writer: Cache<String, [UInt8]>, keys: [String], directory: String, base: UInt64, writes: Int, window: UInt64,
        coherence: Bool
    ) throws {
        let label = coherence ? "the reader following the change log" : "the reader not following the change log"
        let child = Process()
        child.executableURL = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? "/proc/self/exe")
        child.arguments = CoherenceReader.arguments(
            directory: directory, keys: keys.count, valueBytes: CoherenceSuite.valueBytes, base: base, writes: writes,
            coherence: coherence)
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
        func failure(_ what: String) -> TwoProcessFailure {
            try? input.fileHandleForWriting.close()
            child.waitUntilExit()
            let how =
                child.terminationReason == .uncaughtSignal
                ? "killed by signal \(child.terminationStatus)" : "exit status \(child.terminationStatus)"
            return TwoProcessFailure("coherence: \(label) \(what) (\(how))")
        }
        func nextLine(limit: Int) throws -> String? {
            do {
                return try reader.line(limit: limit)
            } catch {
                throw TwoProcessFailure("coherence: \(label): \(error)")
            }
        }
        guard let ready = try nextLine(limit: 1_024) else { throw failure("ended before it was ready") }
        guard ready == "ready" else { throw failure("said \(quoted(ready)) instead of ready") }
        let startAt = nanosecondsNow() + 2_000_000
        guard writeIgnoringSIGPIPE(input.fileHandleForWriting.fileDescriptor, "start \(startAt) \(window)\n") else {
            throw failure("did not take the start line")
        }

        // The writer's schedule: batch b at startAt + b x interval (at once when behind).
        var insertedAt = [UInt64](repeating: 0, count: writes)
        var flushReturned = [UInt64](repeating: 0, count: writes)
        var flushNanos: [UInt64] = []
        let batch = CoherenceSuite.writesPerBatch
        for first in stride(from: 0, to: writes, by: batch) {
            let due = startAt + UInt64(first / batch) * CoherenceSuite.batchIntervalNanos
            let now = nanosecondsNow()
            if due > now {
                var wait = timespec(
                    tv_sec: Int((due - now) / 1_000_000_000), tv_nsec: Int((due - now) % 1_000_000_000))
                var left = timespec()
                while nanosleep(&wait, &left) != 0 && errno == EINTR { wait = left }
            }
            let batchEnd = min(first + batch, writes)
            for index in first..<batchEnd {
                let sequence = base + UInt64(index)
                insertedAt[index] = nanosecondsNow()
                writer.insert(
                    CoherenceValue.make(
                        sequence: sequence, insertedAt: insertedAt[index], bytes: CoherenceSuite.valueBytes),
                    forKey: keys[Int(sequence % UInt64(keys.count))])
            }
            let before = nanosecondsNow()
            try writer.flush()
            let after = nanosecondsNow()
            flushNanos.append(after - before)
            for index in first..<batchEnd { flushReturned[index] = after }
        }
        let writerEnd = nanosecondsNow()
        // The reader may have gone already (not following: at the end of its window).
        _ = writeIgnoringSIGPIPE(input.fileHandleForWriting.fileDescriptor, "done\n")
        try? input.fileHandleForWriting.close()

        // Numbers of at most 20 digits and a comma: the sweeps (one per 1,000 gets, so fewer than
        // one per microsecond of the window), the writes, the lag recordings (one per write).
        let limit = 4_096 + 21 * (Int(window / 1_000) + 2 * writes + 1_024)
        guard let line = try nextLine(limit: limit) else { throw failure("ended without a result") }
        child.waitUntilExit()
        guard child.terminationReason == .exit, child.terminationStatus == 0 else {
            throw failure("failed after its result")
        }
        let result: CoherenceReaderResult
        do {
            result = try CoherenceReaderResult(line: line, writes: writes, keys: keys.count)
        } catch {
            throw TwoProcessFailure("coherence: \(label): \(error)")
        }
        if coherence && result.remaining > 0 {
            throw TwoProcessFailure(
                "coherence: \(label) never returned the last write of \(result.remaining) keys, "
                    + "\(CoherenceReader.graceNanos / 1_000_000_000) s after the writer's end: its memory tier kept "
                    + "serving replaced values")
        }
        var fromInsert: [Int64] = []
        var fromFlush: [Int64] = []
        var unread = 0
        for index in 0..<writes {
            let seen = result.firstSeen[index]
            guard seen != 0 else {
                unread += 1
                continue
            }
            fromInsert.append(Int64(clamping: seen) - Int64(clamping: insertedAt[index]))
            fromFlush.append(Int64(clamping: seen) - Int64(clamping: flushReturned[index]))
        }
        self.result = result
        sample = RunSample(
            operations: result.gets, elapsedNanos: result.end - result.start, batchNanos: result.sweepNanos,
            batchSize: keys.count, misses: result.misses)
        self.flushNanos = flushNanos
        writerNanos = writerEnd > startAt ? writerEnd - startAt : 0
        self.fromInsert = fromInsert
        self.fromFlush = fromFlush
        self.unread = unread
    }
}

extension Array where Element == Int64 {
    /// Nearest-rank percentile (`fraction` in 0...1) of sorted values; 0 when empty.
    func percentile(_ fraction: Double) -> Int64 {
        guard !isEmpty else { return 0 }
        let rank = Int((fraction * Double(count)).rounded(.up))
        return self[Swift.min(Swift.max(rank, 1), count) - 1]
    }

    /// The median of sorted or unsorted values; 0 when empty.
    var median: Int64 { sorted().percentile(0.5) }
}

/// Signed nanoseconds as milliseconds with two decimals: `2.61 ms`, `-0.40 ms`.
func formatSignedMilliseconds(_ nanoseconds: Int64) -> String {
    format(Double(nanoseconds) / 1e6, decimals: 2) + " ms"
}
