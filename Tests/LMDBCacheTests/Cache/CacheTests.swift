import Foundation
import Testing

@testable import LMDBCache

@Suite("Two-tier cache")
struct CacheTests {
    struct Article: Codable, Sendable, Equatable {
        var id: String
        var body: String
    }

    static func open<Value>(
        _ dir: TemporaryDirectory, _ configuration: Cache<String, Value>.Configuration,
        clock: ManualClock = ManualClock(), log: RemovalLog<String, Value>? = nil
    ) throws -> Cache<String, Value> {
        var configuration = configuration
        configuration.clock = clock.clock
        configuration.memory.shards = 1
        configuration.disk.accessTimeGranularity = .zero
        return try Cache(directory: dir.url, configuration: configuration, removalListener: log?.listener)
    }

    @Test("a disk hit is decoded once, promoted to memory, and counted per tier")
    func promotion() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let article = Article(id: "a1", body: String(repeating: "text ", count: 200))
        do {
            let writer = try Self.open(dir, Cache<String, Article>.Configuration())
            writer["a1"] = article
            try writer.flush()
            writer.close()
        }
        let cache = try Self.open(dir, Cache<String, Article>.Configuration())
        defer { cache.close() }
        #expect(cache.memory.totalCount == 0)
        #expect(cache["a1"] == article)
        #expect(cache.memory.totalCount == 1, "promoted")
        #expect(cache.memory.totalCost > 0, "costed by its encoded size")
        #expect(cache["a1"] == article)
        let statistics = cache.statistics
        #expect(statistics.memory.hits == 1)
        #expect(statistics.memory.misses == 1)
        #expect(statistics.disk.hits == 1)
        #expect(statistics.disk.misses == 0)
    }

    @Test("a promoted entry keeps its disk expiry")
    func promotionKeepsExpiry() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try Self.open(dir, Cache<String, String>.Configuration(), clock: clock)
        defer { cache.close() }
        cache.insert("v", forKey: "k", expiresAfter: .seconds(10))
        cache.memory.removeAll()
        #expect(cache["k"] == "v")
        #expect(cache.memory.contains("k"))
        clock.advance(by: .seconds(10))
        #expect(cache["k"] == nil)
    }

    @Test("read your writes with a memory tier of one entry")
    func readYourWrites() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = Cache<String, [UInt8]>.Configuration(memory: .init(countLimit: 1))
        configuration.disk.durability = .batched
        let cache = try Self.open(dir, configuration)
        defer { cache.close() }
        for i in 0..<500 {
            cache["k\(i)"] = sampleBytes(count: 64 + i, compressible: false, seed: UInt64(i))
            #expect(cache.memory.totalCount == 1)
            // Just written (memory), and one written before (evicted from memory; on disk, maybe
            // still queued): both read back as written.
            #expect(cache["k\(i)"] == sampleBytes(count: 64 + i, compressible: false, seed: UInt64(i)))
            if i > 0 {
                #expect(cache["k\(i - 1)"] == sampleBytes(count: 63 + i, compressible: false, seed: UInt64(i - 1)))
            }
        }
        cache.removeValue(forKey: "k10")
        #expect(cache["k10"] == nil, "a removal is seen at once in both tiers")
        cache["k11"] = [1]
        #expect(cache["k11"] == [1], "an overwrite is seen at once")
    }

    @Test("remove and removeAll clear both tiers")
    func removeClearsBothTiers() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir, Cache<String, String>.Configuration())
        defer { cache.close() }
        cache["a"] = "1"
        cache["b"] = "2"
        try cache.flush()
        cache.removeValue(forKey: "a")
        #expect(!cache.contains("a"))
        #expect(try cache.disk?.containsData(forKey: "a") == false)
        cache.removeAll()
        try cache.flush()
        #expect(cache.memory.totalCount == 0)
        #expect(cache.disk?.totalCount == 0)
        #expect(cache["b"] == nil)
    }

    @Test("built-in codecs store values in their natural form")
    func codecs() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let bytes = try Cache<String, [UInt8]>(
            directory: dir.url.appendingPathComponent("bytes"), configuration: .init())
        bytes["k"] = [1, 2, 3]
        #expect(try bytes.disk?.data(forKey: "k") == [1, 2, 3], "raw bytes, not JSON")
        bytes.close()
        let strings = try Cache<String, String>(
            directory: dir.url.appendingPathComponent("strings"), configuration: .init())
        strings["k"] = "héllo"
        #expect(try strings.disk?.data(forKey: "k") == Array("héllo".utf8))
        strings.close()
        let data = try Cache<String, Data>(directory: dir.url.appendingPathComponent("data"), configuration: .init())
        data["k"] = Data([9, 8])
        #expect(try data.disk?.data(forKey: "k") == [9, 8])
        data.close()
        let json = try Cache<String, Article>(directory: dir.url.appendingPathComponent("json"), configuration: .init())
        json["k"] = Article(id: "x", body: "y")
        let stored = try #require(try json.disk?.data(forKey: "k"))
        #expect(try JSONDecoder().decode(Article.self, from: Data(stored)) == Article(id: "x", body: "y"))
        json.close()
    }

    @Test("a stored value the codec cannot decode is a miss and is removed")
    func undecodableValueIsAMiss() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir, Cache<String, String>.Configuration())
        defer { cache.close() }
        try cache.disk?.setData([0xFF, 0xFE], forKey: "bad")
        #expect(cache["bad"] == nil)
        try cache.flush()
        #expect(try cache.disk?.containsData(forKey: "bad") == false)
        #expect(cache.statistics.disk.misses == 1)
    }

    @Test("a value the codec cannot encode stays in memory, and flush reports it")
    func unencodableValue() throws {
        struct Refusing: ValueCodec {
            func encode(_ value: Int) throws -> [UInt8] { throw CocoaError(.coderInvalidValue) }
            func decode(_ bytes: [UInt8]) throws -> Int { 0 }
        }
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Cache<String, Int>(directory: dir.url, configuration: .init(codec: Refusing()))
        defer { cache.close() }
        cache["k"] = 1
        #expect(cache["k"] == 1)
        #expect(throws: CacheError.self) { try cache.flush() }
        #expect(throws: Never.self) { try cache.flush() }
        #expect(cache.statistics.failedWrites == 1)
    }

    @Test("keys of every built-in type, and keys longer than LMDB's maximum, round-trip through disk")
    func keys() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        func check<Key: CacheKey>(_ keys: [Key], _ name: String) throws {
            let cache = try Cache<Key, String>(directory: dir.url.appendingPathComponent(name), configuration: .init())
            for (i, key) in keys.enumerated() { cache[key] = "v\(i)" }
            cache.memory.removeAll()
            for (i, key) in keys.enumerated() { #expect(cache[key] == "v\(i)") }
            for key in keys { #expect(Key(cacheKeyBytes: key.cacheKeyBytes) == key) }
            cache.close()
        }
        try check(["a", "é", String(repeating: "long", count: 300), String(repeating: "long", count: 300) + "!"], "s")
        try check([0, 1, -1, .max, .min], "i")
        try check([UUID(), UUID()], "u")
        try check([[1], [1, 0], Array(repeating: 7, count: 2_000)], "b")
        #expect(String(cacheKeyBytes: [0xFF]) == nil)
        #expect(Int(cacheKeyBytes: [1, 2]) == nil)
    }

    @Test("the listener hears explicit, replaced, expired, count, cost and age removals from each tier")
    func listenerReasons() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let log = RemovalLog<String, String>()
        var configuration = Cache<String, String>.Configuration(memory: .init(countLimit: 3, policy: .lru))
        configuration.disk.countLimit = 3
        configuration.disk.lowWaterMark = 1
        let cache = try Self.open(dir, configuration, clock: clock, log: log)
        defer { cache.close() }
        cache["a"] = "1"
        cache["a"] = "2"
        cache["b"] = "3"
        cache.removeValue(forKey: "b")
        #expect(log.all.map(\.reason) == [.replaced, .explicit])
        #expect(log.all.map(\.value) == ["1", "3"], "memory knows the values")
        #expect(log.all.allSatisfy { $0.tier == .memory })

        cache.memory.removeAll()
        log.clear()
        cache["a"] = "4"  // replaces a value only the disk held
        cache.memory.removeAll()
        log.clear()
        cache.removeValue(forKey: "a")  // on disk only
        #expect(log.all.map(\.reason) == [.explicit])
        #expect(log.all.map(\.tier) == [.disk])

        log.clear()
        for i in 0..<5 { cache["d\(i)"] = "\(i)" }
        try cache.flush()
        cache.waitForEvictionEvents()
        let diskEvictions = log.all.filter { $0.tier == .disk }
        #expect(diskEvictions.map(\.key) == ["d0", "d1"])
        #expect(diskEvictions.allSatisfy { $0.reason == .count && $0.value == nil })
        let memoryEvictions = log.all.filter { $0.tier == .memory }
        #expect(memoryEvictions.map(\.reason) == [.count, .count])
        #expect(memoryEvictions.map(\.value) == ["0", "1"])

        cache.removeAll()
        log.clear()
        cache.insert("e", forKey: "ttl", expiresAfter: .seconds(1))
        clock.advance(by: .seconds(2))
        cache.removeExpired()
        cache.waitForEvictionEvents()
        #expect(log.all.map(\.reason) == [.expired, .expired])
        #expect(Set(log.all.map(\.tier)) == [.memory, .disk])

        log.clear()
        cache["old1"] = "o"
        cache["old2"] = "o"
        clock.advance(by: .seconds(100))
        cache["fresh"] = "f"
        cache.trim(toAge: .seconds(50))
        cache.waitForEvictionEvents()
        #expect(log.all.map(\.reason) == [.age, .age, .age, .age])
        #expect(!log.all.contains { $0.key == "fresh" })
        #expect(cache.statistics.disk.removals[.age] == 2)
        #expect(cache.statistics.memory.removals[.age] == 2)
    }

    @Test("a disk eviction for cost is reported with its reason")
    func diskCostEviction() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let log = RemovalLog<String, [UInt8]>()
        var configuration = Cache<String, [UInt8]>.Configuration()
        configuration.disk.costLimit = 20_000
        configuration.disk.compressionThreshold = nil
        let cache = try Self.open(dir, configuration, log: log)
        defer { cache.close() }
        for i in 0..<10 { cache["v\(i)"] = [UInt8](repeating: UInt8(i), count: 4_000) }
        try cache.flush()
        cache.waitForEvictionEvents()
        let reasons = log.all.filter { $0.tier == .disk }.map(\.reason)
        #expect(!reasons.isEmpty && reasons.allSatisfy { $0 == .cost })
        #expect(cache.disk!.totalCost <= 20_000)
    }

    @Test("a memory-only cache has no disk tier and the same API")
    func memoryOnly() {
        let cache = Cache<Int, String>(memory: .init(countLimit: 2, policy: .lru))
        cache[1] = "a"
        cache[2] = "b"
        cache[3] = "c"
        #expect(cache.disk == nil)
        #expect(cache[1] == nil)
        #expect(cache[3] == "c")
        #expect(throws: Never.self) { try cache.flush() }
        cache.close()
        #expect(cache[3] == nil)
    }

    @Test("closing does not report the memory tier's entries as removed")
    func closeIsNotARemoval() {
        let log = RemovalLog<Int, String>()
        let cache = Cache<Int, String>(memory: .init(countLimit: 10), removalListener: log.listener)
        cache[1] = "a"
        cache.close()
        #expect(log.all.isEmpty)
        #expect(cache.memory.totalCount == 0)
    }

    @Test("after close, lookups miss, inserts are refused and flush throws closed; nothing crashes")
    func useAfterClose() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir, Cache<String, String>.Configuration())
        cache["a"] = "1"
        cache.close()
        cache.close()
        #expect(cache["a"] == nil)
        cache["b"] = "2"
        #expect(cache["b"] == nil)
        #expect(!cache.contains("a"))
        #expect(throws: CacheError.closed) { try cache.flush() }
        await #expect(throws: CacheError.closed) { try await cache.value(forKey: "c") { "3" } }
        let reopened = try Self.open(dir, Cache<String, String>.Configuration())
        #expect(reopened["a"] == "1", "close flushed")
        reopened.close()
    }

    @Test("Cache(name:) lives under $XDG_CACHE_HOME, else ~/.cache")
    func namedLocation() throws {
        let homeExists: (String) -> Bool = { $0 == "/home/u" }
        #expect(
            try CacheDirectory.named(
                "articles", environment: ["XDG_CACHE_HOME": "/srv/cache", "HOME": "/home/u"], isDirectory: homeExists
            ).path == "/srv/cache/articles")
        #expect(
            try CacheDirectory.named(
                "articles", environment: ["XDG_CACHE_HOME": "relative", "HOME": "/home/u"], isDirectory: homeExists
            ).path == "/home/u/.cache/articles")
        #expect(
            try CacheDirectory.named("a.b", environment: ["HOME": "/home/u"], isDirectory: homeExists).path
                == "/home/u/.cache/a.b")
    }

    @Test("Cache(name:) never creates a missing home directory (a system account's /nonexistent)")
    func missingHome() throws {
        let missing = TemporaryDirectory()
        defer { missing.remove() }
        #expect {
            _ = try CacheDirectory.named("articles", environment: ["HOME": missing.path])
        } throws: { error in
            guard case .directoryUnavailable(let path, _) = error as? CacheError else { return false }
            return path == missing.path
        }
        #expect(!FileManager.default.fileExists(atPath: missing.path))
        // An existing home gets its .cache.
        try FileManager.default.createDirectory(at: missing.url, withIntermediateDirectories: true)
        #expect(
            try CacheDirectory.named("articles", environment: ["HOME": missing.path]).path == missing.path
                + "/.cache/articles")
    }

    @Test(
        "Cache(name:) refuses names that would leave the cache root", arguments: ["", ".", "..", "a/b", "/abs", "a\0b"])
    func invalidNames(name: String) {
        #expect {
            _ = try Cache<String, String>(name: name, configuration: .init())
        } throws: { error in
            guard case .invalidName(let rejected, let reason) = error as? CacheError else { return false }
            return rejected == name && !reason.isEmpty
        }
    }

    @Test("Cache(name:) opens a working cache in the XDG directory")
    func namedCache() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        setenv("XDG_CACHE_HOME", dir.path, 1)
        defer { unsetenv("XDG_CACHE_HOME") }
        let cache = try Cache<String, String>(name: "named-test", configuration: .init())
        cache["k"] = "v"
        try cache.flush()
        cache.close()
        #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("named-test/data.mdb").path))
    }
}
