import Foundation
import Testing

@testable import LMDBCache

@Suite("Several processes and killed writers", .serialized)
struct DiskCacheProcessTests {
    @Test("a second process writing the same directory while this one reads and writes: totals exact")
    func secondProcessWriter() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        // Small, so both processes grow the map and each adopts the other's growth.
        configuration.initialMapSize = 1 << 20
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let helper = try HelperProcess(["write", dir.path, "other-", "4000"])
        for index in 0..<4_000 {
            let value = sampleBytes(count: 64 + index % 1_500, compressible: index % 2 == 1, seed: UInt64(index))
            try disk.setData(value, forKey: "mine-\(index)")
            if index % 10 == 0 { _ = try disk.data(forKey: "other-\(index / 2)") }
        }
        try disk.flush()
        #expect(helper.readLine() == "done 4000")
        #expect(helper.wait() == 0)

        #expect(disk.totalCount == 8_000)
        let report = try disk.store.verify()
        #expect(report.isClean, "\(report.indexProblems)")
        #expect(report.scanned == report.recorded)
        for index in stride(from: 0, to: 4_000, by: 97) {
            let expected = sampleBytes(count: 64 + index % 2_000, compressible: index % 2 == 0, seed: UInt64(index))
            #expect(try disk.data(forKey: "other-\(index)") == expected)
        }
    }

    @Test(
        "a writer killed with SIGKILL leaves a store that opens and holds every write it flushed",
        arguments: ["batched", "periodic"])
    func killedWriter(durability: String) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        for round in 0..<3 {
            let helper = try HelperProcess(["churn", dir.path, durability])
            var flushed = 0
            // Kill after a different number of confirmed flushes each round.
            for _ in 0..<(2 + round * 3) {
                guard let line = helper.readLine(), line.hasPrefix("flushed ") else { break }
                flushed = Int(line.dropFirst("flushed ".count)) ?? flushed
            }
            helper.kill()
            #expect(flushed > 0, "the helper confirmed flushes before the kill")

            let disk = try DiskCache(directory: dir.url)
            let report = try disk.store.verify()
            #expect(report.isClean, "round \(round): \(report.indexProblems) \(report.damaged.count) damaged")
            #expect(disk.totalCount == report.scanned.count)
            for index in 0..<max(0, flushed - 2) {
                let stored = try disk.data(forKey: ChurnSequence.key(index))
                if stored != ChurnSequence.expectedValue(forKeyIndex: index) {
                    Issue.record("round \(round): key \(index) of \(flushed) flushed steps is wrong")
                    break
                }
            }
            disk.close()
        }
    }
}
