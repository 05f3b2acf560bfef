import Foundation
import LMDBCache
import Synchronization

extension Suite {
    /// How long reads wait while a trim removes every one of `options.keys` entries: one thread
    /// reads random keys and times each read, first alone, then while the main thread runs
    /// `trim(toCount: 0)` (transactions of 256 removals). Reports the longest and the 99.9th
    /// percentile read of each phase, and the trim's duration.
    func trimLatencyBenchmark() throws {
        let count = options.keys
        progress("trim: filling \(count) entries of 1 KB")
        let directory = try workspace.makeDirectory("trim")
        defer { workspace.remove(directory) }
        var configuration = DiskCache.Configuration()
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: URL(fileURLWithPath: directory), configuration: configuration)
        defer { disk.close() }
        let value = [UInt8](repeating: 0x5A, count: 1_024)
        for i in 0..<count { try disk.setData(value, forKey: "key-\(i)") }
        try disk.flush()

        let alone = try timeReads(disk, count: count) {
            // As long as the trim phase takes, without a trim.
            Thread.sleep(forTimeInterval: 2)
        }
        var trimSeconds = 0.0
        let during = try timeReads(disk, count: count) {
            let start = ContinuousClock.now
            try? disk.trim(toCount: 0)
            trimSeconds = (ContinuousClock.now - start).seconds
        }
        notes.append(
            String(
                format:
                    "trim: reads while trim(toCount: 0) removed %@ entries in %.2f s: longest %.0f µs, p99.9 %.0f µs, %d reads; alone: longest %.0f µs, p99.9 %.0f µs, %d reads",
                abbreviated(count), trimSeconds, during.longest, during.p999, during.reads, alone.longest, alone.p999,
                alone.reads))
    }

    /// Reads random keys on a second thread, timing each, while `work` runs on this one.
    private func timeReads(_ disk: DiskCache, count: Int, during work: () throws -> Void) throws
        -> (longest: Double, p999: Double, reads: Int)
    {
        let stop = Atomic<Bool>(false)
        let latencies = Mutex<[Double]>([])
        let finished = DispatchSemaphore(value: 0)
        let reader = Thread {
            var local: [Double] = []
            local.reserveCapacity(1 << 20)
            var random = SystemRandomNumberGenerator()
            while !stop.load(ordering: .relaxed) {
                let key = "key-\(Int.random(in: 0..<count, using: &random))"
                let start = ContinuousClock.now
                _ = try? disk.data(forKey: key)
                local.append((ContinuousClock.now - start).seconds * 1e6)
            }
            latencies.withLock { $0 = local }
            finished.signal()
        }
        reader.start()
        try work()
        stop.store(true, ordering: .relaxed)
        finished.wait()
        let sorted = latencies.withLock { $0 }.sorted()
        guard !sorted.isEmpty else { return (0, 0, 0) }
        return (sorted.last!, sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.999))], sorted.count)
    }
}
