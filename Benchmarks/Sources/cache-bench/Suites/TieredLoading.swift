import BenchmarkData
import Foundation
import LMDBCache
import Synchronization

// The tiered suite's section "Loading against a slow or failing backend": get-or-load in front of a
// simulated origin (a loader that sleeps, and sometimes throws), without and with `Freshness`, side
// by side. Three backends: every load takes 1 ms; 1% of loads take 100 ms (a tail); loads take 1 ms
// and then all throw for a while (an outage). For each backend the two configurations run at the
// same time, each with its own cache and its own instance of the backend on the same schedule, so a
// disturbance of the machine hits both. Eight callers per configuration, each call timed on its own.

/// The loading section of the tiered suite: its rows, its table, and what to print around them.
struct TieredLoadingSection {
    /// What the simulated origin does.
    enum Backend: String, CaseIterable {
        /// Every load sleeps 1 ms.
        case fixed = "1 ms"
        /// 1% of loads sleep 100 ms, the rest 1 ms.
        case tail
        /// Loads sleep 1 ms; those that end in the outage phase then throw.
        case outage
    }

    /// The phases of a run, each a whole number of units long. Every backend runs all four; only
    /// the outage backend fails in the outage phase.
    enum Phase: Int, CaseIterable {
        case warmUp, normal, outage, recovery

        var name: String {
            switch self {
            case .warmUp: return "warm-up"
            case .normal: return "normal"
            case .outage: return "outage"
            case .recovery: return "recovery"
            }
        }

        /// Length in units.
        var units: Int {
            switch self {
            case .warmUp: return 2
            case .normal: return 3
            case .outage: return 4
            case .recovery: return 3
            }
        }
    }

    /// One column of the comparison: the freshness every call passes.
    struct Configuration {
        var name: String
        var freshness: Freshness
    }

    /// What one call saw.
    struct Sample {
        var nanoseconds: UInt64
        var phase: Phase
        var answered: Bool
    }

    /// The counts of `cache.statistics` the section reports, over one span.
    struct Counts {
        var loads = 0
        var loadFailures = 0
        var refreshes = 0
        var refreshFailures = 0
        var staleServedOnError = 0
        var staleServedOnTimeout = 0
        var loadTimeouts = 0

        init(from before: CacheStatistics, to after: CacheStatistics) {
            loads = after.loads - before.loads
            loadFailures = after.loadFailures - before.loadFailures
            refreshes = after.refreshes - before.refreshes
            refreshFailures = after.refreshFailures - before.refreshFailures
            staleServedOnError = after.staleServedOnError - before.staleServedOnError
            staleServedOnTimeout = after.staleServedOnTimeout - before.staleServedOnTimeout
            loadTimeouts = after.loadTimeouts - before.loadTimeouts
        }
    }

    /// The unit every lifetime and phase is a multiple of: 1 s, 100 ms with `--quick`.
    let unit: Duration
    /// Keys drawn uniformly: 2,000, 200 with `--quick`. At the callers' pace (8 calls per ms in
    /// all) each key is asked for about 4 times per unit, 8 times per lifetime: often enough for a
    /// reload in the second half of its life to be likely, rarely enough that without refresh
    /// about one call in nine finds its key expired (and 1% of those on the tail backend meet a
    /// 100 ms load: above a thousandth of the calls, so p99.9 shows it).
    let keySpace: Int
    /// Concurrent callers per configuration.
    let callers = 8
    /// A caller calls at most once per this long: the next call is due this long after the last
    /// was due, or at once when the last call ended later than that.
    let pacing = Duration.milliseconds(1)
    let valueSize = 1_024
    /// Waited after the last call before the final counts: longer than any simulated load, so the
    /// background loads the run started have finished and are counted.
    let drain = Duration.milliseconds(300)
    let staleIfError = Duration.seconds(60)
    let timeout = Duration.milliseconds(20)
    let hardTimeout = Duration.milliseconds(200)

    init(quick: Bool) {
        unit = quick ? .milliseconds(100) : .seconds(1)
        keySpace = quick ? 200 : 2_000
    }

    /// How often the callers at their pace ask for each key, per unit.
    var callsPerKeyPerUnit: Int { Int((unit / pacing * Double(callers) / Double(keySpace)).rounded()) }

    /// Every loaded value's time to live, in both configurations.
    var expiresAfter: Duration { unit * 2 }
    var refreshAfter: Duration { unit }

    var configurations: [Configuration] {
        [
            Configuration(name: "no freshness", freshness: Freshness()),
            Configuration(
                name: "freshness",
                freshness: Freshness(
                    refreshAfter: refreshAfter, staleIfError: staleIfError, timeout: timeout,
                    hardTimeout: hardTimeout)),
        ]
    }

    /// The timed phases' length (all but the warm-up).
    var timedUnits: Int { Phase.allCases.dropFirst().reduce(0) { $0 + $1.units } }

    /// Runs every backend and returns the rows (for the JSON), the table, and the lines that
    /// describe them.
    func run(options: Options, log: (String) -> Void) throws -> (
        rows: [ResultRow], table: ExtraTable, parameters: [(String, String)], notes: [String]
    ) {
        var rows: [ResultRow] = []
        var cells: [[String]] = []
        var groupStarts: Set<Int> = []
        for (backendIndex, backend) in Backend.allCases.enumerated() {
            let configurationNames = configurations.map(\.name).joined(separator: " and ")
            let length = seconds(unit * (Phase.warmUp.units + timedUnits))
            log(
                "tiered: loading: \(backend.rawValue) backend, \(configurationNames) side by side for "
                    + "\(format(length, decimals: 1)) s")
            let results = try measure(backend, index: backendIndex, options: options)
            var spans = [Span(name: "whole run", phases: Set(Phase.allCases.dropFirst()), counts: \.whole)]
            if backend == .outage { spans.append(Span(name: "outage", phases: [.outage], counts: \.outage)) }
            for span in spans {
                if !cells.isEmpty { groupStarts.insert(cells.count) }
                for (configuration, result) in zip(configurations, results) {
                    let row = row(backend, span, configuration, result)
                    rows.append(row)
                    let counts = result[keyPath: span.counts]
                    cells.append([
                        backend.rawValue, span.name, configuration.name, "\(row.calls ?? 0)",
                        formatPercent(row.answeredRatio), formatNanoseconds(row.p50Nanoseconds),
                        formatNanoseconds(row.p99Nanoseconds), formatNanoseconds(row.p999Nanoseconds ?? 0),
                        "\(counts.loads)", "\(counts.refreshes)", "\(counts.refreshFailures)",
                        "\(counts.staleServedOnError)", "\(counts.staleServedOnTimeout)", "\(counts.loadTimeouts)",
                    ])
                    log(
                        "tiered: loading: \(backend.rawValue), \(span.name), \(configuration.name): "
                            + "\(row.calls ?? 0) calls, answered \(formatPercent(row.answeredRatio)), "
                            + "p99 \(formatNanoseconds(row.p99Nanoseconds)), "
                            + "p99.9 \(formatNanoseconds(row.p999Nanoseconds ?? 0)), \(counts.loads) loads")
                }
            }
        }
        let table = ExtraTable(
            title: "Loading against a slow or failing backend (\(callers) callers per configuration, get-or-load)",
            header: [
                "backend", "phase", "configuration", "calls", "answered", "p50", "p99", "p99.9", "loads", "refreshed",
                "refresh failed", "stale on error", "stale on timeout", "timed out",
            ],
            rightAligned: Set(3...13), rows: cells, groupStarts: groupStarts)
        return (rows, table, parameters, notes)
    }

    /// A stretch of a run that a row reports: the whole timed run, or the outage phase.
    struct Span {
        var name: String
        var phases: Set<Phase>
        var counts: KeyPath<ConfigurationResult, Counts>
    }

    /// The JSON row of one configuration on one backend over one span.
    private func row(
        _ backend: Backend, _ span: Span, _ configuration: Configuration, _ result: ConfigurationResult
    ) -> ResultRow {
        let samples = result.samples.filter { span.phases.contains($0.phase) }
        let times = samples.map(\.nanoseconds)
        let length = seconds(unit * span.phases.reduce(0) { $0 + $1.units })
        let workload =
            "get-or-load, \(backend.rawValue) backend" + (span.phases.count == 1 ? ", \(span.name) phase" : "")
        var row = ResultRow(
            suite: "tiered", system: "LMDBCache", workload: workload, threads: callers, valueBytes: valueSize,
            opsPerSecond: Double(samples.count) / length, p50Nanoseconds: Double(times.percentile(0.50)),
            p99Nanoseconds: Double(times.percentile(0.99)), variant: configuration.name)
        row.runsOpsPerSecond = [row.opsPerSecond]
        row.p999Nanoseconds = Double(times.percentile(0.999))
        row.calls = samples.count
        row.answeredRatio = Double(samples.count { $0.answered }) / Double(max(samples.count, 1))
        let counts = result[keyPath: span.counts]
        row.loads = counts.loads
        row.loadFailures = counts.loadFailures
        row.refreshes = counts.refreshes
        row.refreshFailures = counts.refreshFailures
        row.staleServedOnError = counts.staleServedOnError
        row.staleServedOnTimeout = counts.staleServedOnTimeout
        row.loadTimeouts = counts.loadTimeouts
        return row
    }

    /// What one configuration saw on one backend.
    struct ConfigurationResult {
        var samples: [Sample]
        /// From the end of the warm-up until `drain` after the last call.
        var whole: Counts
        var outage: Counts
    }

    /// Runs both configurations against `backend` at once, each with its own cache and origin.
    private func measure(_ backend: Backend, index: Int, options: Options) throws -> [ConfigurationResult] {
        let clock = ContinuousClock()
        // Far enough ahead for every caller to be started and waiting.
        let start = clock.now + .milliseconds(50)
        var boundaries: [ContinuousClock.Instant] = []
        var boundary = start
        for phase in Phase.allCases {
            boundary = boundary + unit * phase.units
            boundaries.append(boundary)
        }
        let end = boundaries[Phase.recovery.rawValue]
        let outage = boundaries[Phase.normal.rawValue]..<boundaries[Phase.outage.rawValue]
        let phaseEnds = boundaries
        let values = Payload.json4K.pool(count: 64, seed: 11).map { Array($0.prefix(valueSize)) }
        let keys = (0..<keySpace).map { "item:\($0)" }
        let expiresAfter = expiresAfter
        let pacing = pacing

        var caches: [Cache<String, [UInt8]>] = []
        var directories: [String] = []
        defer {
            for cache in caches { cache.close() }
            for directory in directories { try? FileManager.default.removeItem(atPath: directory) }
        }
        for configurationIndex in configurations.indices {
            let directory =
                "\(options.scratchDirectory)/cache-bench-tiered-loading-\(getpid())-\(index)-\(configurationIndex)"
            directories.append(directory)
            // Every key fits in the memory tier: what the section shows is lifetimes, not evictions.
            caches.append(
                try Cache<String, [UInt8]>(
                    directory: URL(fileURLWithPath: directory),
                    configuration: .init(memory: .init(countLimit: keySpace * 4), disk: .init())))
        }

        let records = configurations.map { _ in (0..<callers).map { _ in CallerRecord() } }
        let done = DispatchSemaphore(value: 0)
        for (configurationIndex, configuration) in configurations.enumerated() {
            let cache = caches[configurationIndex]
            let origin = SimulatedOrigin(backend: backend, outage: outage, values: values)
            let freshness = configuration.freshness
            for caller in 0..<callers {
                let record = records[configurationIndex][caller]
                Task.detached {
                    // The same key sequence per caller in both configurations.
                    var random = SplitMix64(seed: 0x5EED_10AD &+ UInt64(index) &* 0x100 &+ UInt64(caller))
                    var samples: [Sample] = []
                    var due = start
                    while true {
                        try? await clock.sleep(until: due)
                        let began = clock.now
                        guard began < end else { break }
                        let phase = Phase(rawValue: phaseEnds.firstIndex { began < $0 } ?? Phase.recovery.rawValue)!
                        let key = Int(random.next() % UInt64(keySpace))
                        var answered = true
                        do {
                            let value = try await cache.value(
                                forKey: keys[key], expiresAfter: expiresAfter, freshness: freshness
                            ) { try await origin.load(key) }
                            record.checksum &+= value.count
                        } catch {
                            answered = false
                        }
                        let ended = clock.now
                        samples.append(
                            Sample(
                                nanoseconds: nanoseconds(began.duration(to: ended)), phase: phase, answered: answered))
                        due = max(due + pacing, ended)
                    }
                    record.samples = samples
                    done.signal()
                }
            }
        }
        // This thread takes the counts at the phase boundaries while the callers run.
        var snapshots: [[CacheStatistics]] = []
        for boundary in boundaries {
            blockThread(until: boundary)
            snapshots.append(caches.map(\.statistics))
        }
        for _ in 0..<(callers * configurations.count) { done.wait() }
        blockThread(until: clock.now + drain)
        let final = caches.map(\.statistics)
        return configurations.indices.map { configuration in
            ConfigurationResult(
                samples: records[configuration].flatMap(\.samples),
                whole: Counts(from: snapshots[Phase.warmUp.rawValue][configuration], to: final[configuration]),
                outage: Counts(
                    from: snapshots[Phase.normal.rawValue][configuration],
                    to: snapshots[Phase.outage.rawValue][configuration]))
        }
    }

    /// The section's lines for the suite's header.
    var parameters: [(String, String)] {
        let phases = Phase.allCases.map { "\($0.name) \(describe(unit * $0.units))" }.joined(separator: ", ")
        return [
            (
                "loading: cache",
                "a new Cache<String, [UInt8]> per backend and configuration, memory countLimit \(keySpace * 4) "
                    + "(every key fits), disk default configuration"
            ),
            (
                "loading: calls",
                "\(callers) callers per configuration, each calling value(forKey:expiresAfter:freshness:load:) at most "
                    + "once per \(describe(pacing)) (at once after a slower call), keys uniform over \(keySpace) (each "
                    + "asked for about \(callsPerKeyPerUnit) times per \(describe(unit)) at most), \(valueSize) B "
                    + "values; the two configurations of a backend run at the same time, each with its own cache and "
                    + "its own instance of the backend on the same schedule"
            ),
            (
                "loading: backends",
                "1 ms: every load sleeps 1 ms; tail: 1% of loads sleep 100 ms, the rest 1 ms; outage: loads sleep "
                    + "1 ms, and those that end in the outage phase then throw"
            ),
            (
                "loading: phases",
                "\(phases); only the outage backend fails, in the outage phase; the warm-up is not reported, "
                    + "whole run is the \(describe(unit * timedUnits)) after it"
            ),
            (
                "loading: configurations",
                "no freshness: expiresAfter \(describe(expiresAfter)); freshness: expiresAfter "
                    + "\(describe(expiresAfter)), refreshAfter \(describe(refreshAfter)), staleIfError "
                    + "\(describe(staleIfError)), timeout \(describe(timeout)), hardTimeout \(describe(hardTimeout))"
            ),
        ]
    }

    /// The section's lines under the tables.
    var notes: [String] {
        [
            "loading: each call of value(forKey:expiresAfter:freshness:load:) is timed on its own (ContinuousClock, "
                + "from the call to its return or throw), answered or not; answered: the calls that returned a value "
                + "rather than throwing; p99.9: a thousandth of the calls column took longer.",
            "loading: loads counts every run of the loader: those callers waited for, background refreshes "
                + "(refreshed: stored a new value; refresh failed: threw, the old value kept) and loads that went on "
                + "after a caller stopped waiting. stale on error / stale on timeout: calls answered with a value past "
                + "its expiry because the loader threw / was slower than timeout; timed out: calls that got "
                + "CacheError.loadTimedOut. The counts are the cache's statistics over the phase (whole run: until "
                + "\(describe(drain)) after the last call, so the loads the calls started are in).",
            "loading: why these values: expiresAfter \(describe(expiresAfter)) makes every key expire or refresh "
                + "about \(timedUnits / 2) times in the timed run; refreshAfter \(describe(refreshAfter)), half the "
                + "lifetime, reloads a key asked for in the second half of its life before it expires (a key is asked "
                + "for about \(callsPerKeyPerUnit) times in that half); staleIfError \(describe(staleIfError)) "
                + "outlasts the run, so every value loaded stays servable through the "
                + "\(describe(unit * Phase.outage.units)) outage, twice the lifetime (without it every key is gone "
                + "half-way through); timeout \(describe(timeout)) is 20 normal loads, so it cuts only the 100 ms "
                + "tail; hardTimeout \(describe(hardTimeout)) is twice the slowest load, a safety net that should not "
                + "fire here (timed out 0).",
            "loading: how to read it: p99 on the 1 ms backend and p99.9 on the tail backend are what refresh-ahead "
                + "(and timeout) do to the tail: a caller no longer waits for the reload of a key it asks for often, "
                + "and one whose key expired waits at most timeout; their price is the loads column, the extra "
                + "traffic refreshing sends to the backend. answered in the outage backend's outage phase is what "
                + "staleIfError does to availability; its p50 shows it does not make an outage fast: a call for an "
                + "expired key still runs the loader (one per key at a time) and waits for it to throw before it gets "
                + "the stale value, so the backend that is down keeps getting loads.",
            "loading: the callers are a closed loop: one waiting for a slow load makes no calls meanwhile, so a "
                + "configuration that waits more makes fewer calls (calls column), and its tail is if anything "
                + "understated.",
        ]
    }

    /// A duration as the report writes it: `2 s`, `20 ms`.
    private func describe(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1_000 == 0 ? "\(milliseconds / 1_000) s" : "\(milliseconds) ms"
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// `duration` in whole nanoseconds (0 when negative).
private func nanoseconds(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    guard seconds >= 0, attoseconds >= 0 else { return 0 }
    return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
}

/// Blocks this thread until `instant` (at once if it has passed).
private func blockThread(until instant: ContinuousClock.Instant) {
    let remaining = ContinuousClock.now.duration(to: instant)
    guard remaining > .zero else { return }
    let (seconds, attoseconds) = remaining.components
    Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
}

/// What one caller saw. Written only by its task, read after it signalled.
private final class CallerRecord: @unchecked Sendable {
    var samples: [TieredLoadingSection.Sample] = []
    var checksum = 0
}

/// The origin a loader stands for: sleeps as long as a load of the backend takes, then returns the
/// key's value, or throws when the backend is down.
private final class SimulatedOrigin: Sendable {
    struct Down: Error, CustomStringConvertible {
        var description: String { "the simulated backend is down" }
    }

    let backend: TieredLoadingSection.Backend
    /// When the outage backend throws (the others never do).
    let outage: Range<ContinuousClock.Instant>
    let values: [[UInt8]]
    /// Loads started: whether the tail backend's load is slow is drawn from this count.
    private let started = Atomic<UInt64>(0)

    init(backend: TieredLoadingSection.Backend, outage: Range<ContinuousClock.Instant>, values: [[UInt8]]) {
        self.backend = backend
        self.outage = outage
        self.values = values
    }

    func load(_ key: Int) async throws -> [UInt8] {
        let number = started.add(1, ordering: .relaxed).newValue
        let slow = backend == .tail && SplitMix64.mix(number) % 100 == 0
        try await Task.sleep(for: slow ? .milliseconds(100) : .milliseconds(1))
        if backend == .outage, outage.contains(ContinuousClock.now) { throw Down() }
        return values[key % values.count]
    }
}
