import Foundation
import LMDBCacheStorage
import Testing

@testable import LMDBCache

/// Both tiers under 8 concurrent tasks mixing every operation. CI also runs this target under
/// ThreadSanitizer (`scripts/test`), which is what finds a data race the assertions cannot.
@Suite("Stress: 8 tasks, every operation, both tiers")
struct CacheStressTests {
    static let keys = (0..<300).map { "key-\($0)" }
    /// Steps per task: 3,000, or `LMDBCACHE_STRESS_STEPS` (the sanitizer runs of CI take 500:
    /// under ThreadSanitizer this test alone set the stage's length).
    static let steps =
        ProcessInfo.processInfo.environment["LMDBCACHE_STRESS_STEPS"].flatMap { Int($0) }.map { max(1, $0) } ?? 3_000

    /// Values name their key, so a read can tell if it got another key's value.
    static func value(for key: String, version: Int) -> String {
        "\(key)|\(version)|" + String(repeating: "x", count: version % 3 == 0 ? 1_200 : 40)
    }

    @Test("totals stay exact and a read never returns another key's value")
    func mixedOperations() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("lmdbcache-stress-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = Cache<String, String>.Configuration(
            memory: .init(countLimit: 64, costLimit: 40_000),
            disk: .init(countLimit: 200, costLimit: 300_000))
        configuration.memory.shards = 4
        configuration.disk.accessTimeGranularity = .zero
        let removals = Locked<[RemovalReason: Int]>([:])
        let cache = try Cache<String, String>(directory: directory, configuration: configuration) { removal in
            removals.withLock { $0[removal.reason, default: 0] += 1 }
        }
        let wrongValues = Locked(0)
        func check(_ value: String?, _ key: String) {
            if let value, !value.hasPrefix(key + "|") { wrongValues.withLock { $0 += 1 } }
        }

        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var random = Xorshift(seed: UInt64(task + 1))
                    for step in 0..<Self.steps {
                        let key = Self.keys[Int(random.next() % UInt64(Self.keys.count))]
                        switch random.next() % 100 {
                        case 0..<40:
                            check(cache[key], key)
                        case 40..<65:
                            cache[key] = Self.value(for: key, version: step)
                        case 65..<70:
                            cache.insert(
                                Self.value(for: key, version: step), forKey: key, cost: 100,
                                expiresAfter: .seconds(3_600))
                        case 70..<78:
                            cache.removeValue(forKey: key)
                        case 78..<84:
                            _ = cache.contains(key)
                        case 84..<94:
                            let loaded = try await cache.value(forKey: key) { Self.value(for: key, version: -1) }
                            check(loaded, key)
                        case 94:
                            cache.trim(toCount: 150)
                        case 95:
                            cache.trim(toCost: 200_000)
                        case 96:
                            cache.removeExpired()
                        case 97:
                            try cache.flush()
                        case 98:
                            _ = cache.statistics
                        default:
                            if step % 7 == 0 { cache.removeAll() } else { check(cache.memory[key], key) }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        try cache.flush()
        cache.waitForEvictionEvents()

        #expect(wrongValues.withLock { $0 } == 0)
        // Memory: limits hold, and the totals are those of the entries present.
        let inMemory = Self.keys.filter { cache.memory.contains($0) }
        #expect(cache.memory.totalCount == inMemory.count)
        #expect(cache.memory.totalCount <= 64)
        #expect(cache.memory.totalCost <= 40_000)
        // Disk: a full scan agrees with the recorded totals and the indexes.
        let disk = try #require(cache.disk)
        let report = try disk.store.verify()
        #expect(report.isClean, "\(report.indexProblems) \(report.damaged.count) damaged")
        #expect(report.scanned.count == disk.totalCount)
        #expect(report.scanned.bytes == disk.totalCost)
        #expect(disk.totalCount <= 200)
        #expect(disk.totalCost <= 300_000)
        for key in Self.keys {
            check(cache[key], key)
        }
        #expect(wrongValues.withLock { $0 } == 0)
        let statistics = cache.statistics
        #expect(statistics.memory.hits + statistics.memory.misses > 0)
        #expect(statistics.failedWrites == 0)
        #expect((removals.withLock { $0[.count] } ?? 0) > 0, "the limits were exercised")
        cache.close()
    }
}

/// A small deterministic generator, one per task.
struct Xorshift {
    private var state: UInt64

    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }

    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
