import BenchmarkData
import Foundation
import LMDBCache
import Synchronization

// The tiered suite: the two-tier Cache as a service uses it. 90% of operations are get-or-load
// (`value(forKey:load:)`), 10% are inserts, keys drawn Zipf(0.99) from a key space ten times the
// memory tier, so the memory tier serves the hot keys, the disk most of the rest, and the loader
// (standing for the service's database) the keys never seen. Then the section "Loading against a
// slow or failing backend" (TieredLoading.swift): get-or-load with and without Freshness in front
// of a simulated origin that is slow, has a tail, or goes down.

struct TieredSuite: Suite {
    let name = "tiered"

    func run(options: Options, log: (String) -> Void) throws -> SuiteReport {
        let memoryEntries = options.quick ? 2_000 : 50_000
        let keySpace = memoryEntries * 10
        // Long enough for the disk tier to hold most of the keys a Zipf draw reaches.
        let warmupOperations = keySpace * 2
        let operations = options.quick ? 20_000 : 200_000
        let valueSize = 1_024
        let pool = Payload.json4K.pool(count: 64, seed: 11).map { Array($0.prefix(valueSize)) }
        let zipf = ZipfSampler(count: keySpace, exponent: Distribution.zipfExponent, seed: 0x71E5)
        let keys = (0..<keySpace).map { "user:\($0)" }

        var rows: [ResultRow] = []
        for threads in [1, 2] {
            let directory = "\(options.scratchDirectory)/cache-bench-tiered-\(getpid())-\(threads)"
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let cache = try Cache<String, [UInt8]>(
                directory: URL(fileURLWithPath: directory),
                configuration: .init(memory: .init(countLimit: memoryEntries), disk: .init()))
            defer { cache.close() }

            // Per thread: the key indices and which operations insert, drawn before timing.
            func plan(_ count: Int, seed: UInt64) -> [[(key: Int32, inserts: Bool)]] {
                (0..<threads).map { thread in
                    var random = SplitMix64(seed: seed &* 1_000 &+ UInt64(thread))
                    return (0..<count / threads).map { _ in
                        (zipf.keyIndex(unit: random.nextUnit()), random.next() % 10 == 0)
                    }
                }
            }
            log("tiered: \(threads)t: warming up with \(warmupOperations) operations")
            _ = try drive(cache, keys: keys, pool: pool, plan: plan(warmupOperations, seed: 1))
            try cache.flush()
            let before = cache.statistics
            // Several runs, each drained (a flush, untimed) before the next, so the writer's
            // queued commits of one run do not land in the next run's timing.
            let runs = options.repeats(threads: threads)
            log("tiered: \(threads)t: \(runs) runs of \(operations / runs) timed operations")
            var samples: [RunSample] = []
            for run in 0..<runs {
                samples.append(
                    try drive(cache, keys: keys, pool: pool, plan: plan(operations / runs, seed: 2 + UInt64(run))))
                try cache.flush()
            }
            let after = cache.statistics
            let gets = samples.reduce(0) { $0 + $1.misses }  // drive() reports its get-or-load count here
            let memoryHits = after.memory.hits - before.memory.hits
            let diskHits = after.disk.hits - before.disk.hits
            let loads = after.loads - before.loads
            var row = summarize(
                suite: name, system: "LMDBCache", workload: "90% get-or-load, 10% insert", threads: threads,
                valueBytes: valueSize, runs: samples)
            row.misses = nil
            row.memoryHitRatio = Double(memoryHits) / Double(max(gets, 1))
            row.diskHitRatio = Double(diskHits) / Double(max(gets - memoryHits, 1))
            row.hitRatio = Double(memoryHits + diskHits) / Double(max(gets, 1))
            log(
                "tiered: \(threads)t: \(formatRate(row.opsPerSecond)) ops/s, memory \(formatPercent(row.memoryHitRatio)), "
                    + "disk \(formatPercent(row.diskHitRatio)) of memory misses, \(loads) loads, "
                    + "p99 \(formatNanoseconds(row.p99Nanoseconds))")
            rows.append(row)
        }
        let loading = try TieredLoadingSection(quick: options.quick).run(options: options, log: log)
        return SuiteReport(
            suite: name,
            parameters: [
                ("cache", "Cache<String, [UInt8]>: memory countLimit \(memoryEntries), disk default configuration"),
                (
                    "key space",
                    "\(keySpace) keys (10x the memory tier), Zipf(\(Distribution.zipfExponent)), ranks permuted"
                ),
                (
                    "operations",
                    "\(operations) timed after \(warmupOperations) untimed, split over the threads, in "
                        + "\(options.repeats(threads: 1)) runs on 1 thread and \(options.repeats(threads: 2)) on 2, each "
                        + "followed by an untimed flush"
                ),
                ("mix", "90% value(forKey:load:) (get-or-load), 10% insert of a \(valueSize) B value"),
                ("loader", "returns a \(valueSize) B value at once (no simulated backend latency)"),
            ] + loading.parameters,
            notes: [
                "ops/s: median over the runs of all threads' operations over the span from first start to last end; "
                    + "min-max: the runs' range. Hit ratios are over all runs.",
                "memory hits: get-or-loads the memory tier served; disk hits: the share of the memory tier's "
                    + "misses the disk tier served; either tier: get-or-loads that did not run the loader.",
                "p50/p99: each operation timed on its own, over all threads; a load stores its value in both tiers "
                    + "(the disk write is queued, not waited for).",
                "Threads are Swift tasks on the cooperative pool, each awaiting its operations in turn.",
            ] + loading.notes,
            rows: rows, extraTables: [loading.table], extraRows: loading.rows)
    }

    /// Runs each thread's plan as a task, all started together; returns the timings, with the
    /// number of get-or-loads in `misses`.
    private func drive(
        _ cache: Cache<String, [UInt8]>, keys: [String], pool: [[UInt8]], plan: [[(key: Int32, inserts: Bool)]]
    ) throws -> RunSample {
        let cache = Unchecked(value: cache)
        let keys = Unchecked(value: keys)
        let pool = Unchecked(value: pool)
        let plan = Unchecked(value: plan)
        let records = plan.value.map { _ in ThreadRecord() }
        let failure = FirstFailure()
        let done = DispatchSemaphore(value: 0)
        for (thread, record) in records.enumerated() {
            Task.detached {
                do {
                    var times: [UInt64] = []
                    times.reserveCapacity(plan.value[thread].count)
                    var gets = 0
                    record.start = nanosecondsNow()
                    for step in plan.value[thread] {
                        let key = keys.value[Int(step.key)]
                        let value = pool.value[Int(step.key) % pool.value.count]
                        let before = nanosecondsNow()
                        if step.inserts {
                            cache.value.insert(value, forKey: key)
                        } else {
                            gets += 1
                            let found = try await cache.value.value(forKey: key) { value }
                            record.checksum &+= found.count
                        }
                        times.append(nanosecondsNow() - before)
                    }
                    record.end = nanosecondsNow()
                    record.batchNanos = times
                    record.misses = gets
                } catch {
                    failure.record(error)
                }
                done.signal()
            }
        }
        for _ in records { done.wait() }
        if let error = failure.error { throw error }
        return RunSample(
            operations: records.reduce(0) { $0 + $1.batchNanos.count },
            elapsedNanos: records.map(\.end).max()! - records.map(\.start).min()!,
            batchNanos: records.flatMap(\.batchNanos), batchSize: 1, misses: records.reduce(0) { $0 + $1.misses })
    }
}

/// The first error any of several tasks threw.
final class FirstFailure: Sendable {
    private let first = Mutex<(any Error)?>(nil)

    func record(_ error: any Error) {
        first.withLock { if $0 == nil { $0 = error } }
    }

    var error: (any Error)? { first.withLock { $0 } }
}
