import BenchmarkData
import Foundation
import RawLMDB
import Synchronization

// The disk suite's timed loops, one function per workload. Each times one run of one system and
// returns its sample; the suite interleaves the runs and drains each system after its own.

enum DiskWorkloads {
    /// Times a get of `keys[i]` for each `i` in `order`, one at a time (or a pipeline at a time),
    /// stopping early once `seconds` have passed (a slow system then does fewer operations;
    /// throughput is operations over the time they took).
    static func gets(_ system: any DiskSystem, keys: [[UInt8]], order: [Int], seconds: Double) throws -> RunSample {
        var times: [UInt64] = []
        times.reserveCapacity(order.count)
        var misses = 0
        var bytes = 0
        var done = 0
        let depth = system.pipelineDepth
        let start = nanosecondsNow()
        let deadline = start + UInt64(seconds * 1e9)
        while done < order.count {
            let end = min(done + depth, order.count)
            let before = nanosecondsNow()
            if depth > 1 {
                let (found, got) = try system.get(many: ArraySlice(order[done..<end].map { keys[$0] }))
                misses += (end - done) - found
                bytes &+= got
            } else if let value = try system.get(keys[order[done]]) {
                bytes &+= value.count
            } else {
                misses += 1
            }
            let after = nanosecondsNow()
            times.append(after - before)
            done = end
            if after > deadline { break }
        }
        let elapsed = nanosecondsNow() - start
        blackHole(bytes)
        return RunSample(operations: done, elapsedNanos: elapsed, batchNanos: times, batchSize: depth, misses: misses)
    }

    /// Times a set of `keys[i]` to a pool value for each `i` in `order`, then `finishWrites()`
    /// (included in the throughput, not in the per-operation times).
    static func sets(
        _ system: any DiskSystem, keys: [[UInt8]], order: [Int], pool: [[UInt8]], shift: Int
    ) throws -> RunSample {
        var times: [UInt64] = []
        times.reserveCapacity(order.count)
        let depth = system.pipelineDepth
        let start = nanosecondsNow()
        var done = 0
        while done < order.count {
            let end = min(done + depth, order.count)
            let before = nanosecondsNow()
            if depth > 1 {
                try system.set(many: order[done..<end].map { (key: keys[$0], value: pool[($0 + shift) % pool.count]) })
            } else {
                let index = order[done]
                try system.set(pool[(index + shift) % pool.count], forKey: keys[index])
            }
            times.append(nanosecondsNow() - before)
            done = end
        }
        try system.finishWrites()
        let elapsed = nanosecondsNow() - start
        return RunSample(operations: order.count, elapsedNanos: elapsed, batchNanos: times, batchSize: depth, misses: 0)
    }

    /// Times `handles.count` threads at once, each setting the keys of its own `orders[thread]`
    /// to pool values one at a time through its own handle (each set durable on return, as the
    /// handles are synchronous); throughput is every thread's sets over the first thread's start
    /// to the last one's end (threads start one after another, a few tens of microseconds apart).
    static func concurrentSets(
        _ handles: [any DiskSystem], keys: [[UInt8]], orders: [[Int]], pool: [[UInt8]]
    ) throws -> RunSample {
        struct ThreadRun: Sendable {
            var start: UInt64
            var end: UInt64
            var times: [UInt64]
            var failure: String?
        }
        let runs = Mutex<[ThreadRun]>([])
        // Each thread uses only its own handle.
        nonisolated(unsafe) let handles = handles
        onThreads(handles.count) { thread in
            let handle = handles[thread]
            var run = ThreadRun(start: nanosecondsNow(), end: 0, times: [], failure: nil)
            run.times.reserveCapacity(orders[thread].count)
            do {
                for index in orders[thread] {
                    let before = nanosecondsNow()
                    try handle.set(pool[index % pool.count], forKey: keys[index])
                    run.times.append(nanosecondsNow() - before)
                }
            } catch {
                run.failure = "\(error)"
            }
            run.end = nanosecondsNow()
            runs.withLock { $0.append(run) }
        }
        let all = runs.withLock { $0 }
        if let failure = all.lazy.compactMap(\.failure).first { throw BenchError(description: failure) }
        let start = all.map(\.start).min() ?? 0
        let end = all.map(\.end).max() ?? start
        let times = all.flatMap(\.times)
        return RunSample(
            operations: times.count, elapsedNanos: end - start, batchNanos: times, batchSize: 1, misses: 0)
    }

    /// One operation of a mixed workload: a get, or a set (`value` is the pool index to store).
    struct MixedOperation {
        var key: Int32
        var setsValue: Int32?
    }

    /// `count` operations on keys drawn by `zipf`, a share `setShare` of them sets, drawn from `seed`.
    static func mixPlan(count: Int, setShare: Double, zipf: ZipfSampler, poolCount: Int, seed: UInt64)
        -> [MixedOperation]
    {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let key = zipf.keyIndex(unit: random.nextUnit())
            let sets = random.nextUnit() < setShare
            return MixedOperation(key: key, setsValue: sets ? Int32(random.next() % UInt64(poolCount)) : nil)
        }
    }

    /// Times `plan` one operation at a time (stopping early after `seconds`, if given), then
    /// `finishWrites()`, included in the throughput. Latencies: gets only.
    static func mix(
        _ system: any DiskSystem, keys: [[UInt8]], plan: [MixedOperation], pool: [[UInt8]], seconds: Double?
    ) throws -> RunSample {
        var getTimes: [UInt64] = []
        getTimes.reserveCapacity(plan.count)
        var misses = 0
        var bytes = 0
        var done = 0
        let start = nanosecondsNow()
        let deadline = seconds.map { start + UInt64($0 * 1e9) } ?? .max
        for operation in plan {
            let key = keys[Int(operation.key)]
            let before = nanosecondsNow()
            if let value = operation.setsValue {
                try system.set(pool[Int(value)], forKey: key)
            } else {
                if let found = try system.get(key) { bytes &+= found.count } else { misses += 1 }
                getTimes.append(nanosecondsNow() - before)
            }
            done += 1
            if nanosecondsNow() > deadline { break }
        }
        try system.finishWrites()
        let elapsed = nanosecondsNow() - start
        blackHole(bytes)
        return RunSample(operations: done, elapsedNanos: elapsed, batchNanos: getTimes, batchSize: 1, misses: misses)
    }

    /// Times gets of `keys[i]` for `i` in `order` on this thread (stopping early after `seconds`)
    /// while another thread writes through `writer` without pause: batches of 100 sets of
    /// present keys, each batch followed by `finishWrites()` (a commit, and the system's sync).
    /// The sample's `concurrentWrites` counts the writes finished meanwhile.
    static func getsWhileWriting(
        _ system: any DiskSystem, writer: any DiskSystem, keys: [[UInt8]], entries: Int, order: [Int],
        pool: [[UInt8]], seconds: Double, seed: UInt64
    ) throws -> RunSample {
        let stop = Atomic<Bool>(false)
        let written = Atomic<Int>(0)
        let failure = Mutex<String?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let shared = Unchecked(value: (writer: writer, keys: keys, pool: pool))
        let thread = Thread {
            var random = SplitMix64(seed: seed)
            let (writer, keys, pool) = shared.value
            do {
                while !stop.load(ordering: .relaxed) {
                    for _ in 0..<100 {
                        let index = Int(random.next() % UInt64(entries))
                        try writer.set(pool[Int(random.next() % UInt64(pool.count))], forKey: keys[index])
                    }
                    try writer.finishWrites()
                    written.add(100, ordering: .relaxed)
                }
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
            finished.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
        // Let the writer get going before the first timed get.
        while written.load(ordering: .relaxed) == 0, failure.withLock({ $0 }) == nil { sched_yield() }
        let writesBefore = written.load(ordering: .relaxed)
        var sample: RunSample
        do {
            sample = try gets(system, keys: keys, order: order, seconds: seconds)
        } catch {
            stop.store(true, ordering: .relaxed)
            finished.wait()
            throw error
        }
        sample.concurrentWrites = written.load(ordering: .relaxed) - writesBefore
        stop.store(true, ordering: .relaxed)
        finished.wait()
        if let message = failure.withLock({ $0 }) {
            throw BenchError(description: "\(system.name): the writer thread failed: \(message)")
        }
        return sample
    }
}
