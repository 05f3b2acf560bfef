import Foundation
import Testing

@testable import LMDBCache

/// The public API as ../shared/DESIGN.md shows it, statement for statement, with what each
/// comment promises checked.
@Suite("DESIGN.md examples")
struct DesignExamplesTests {
    struct Article: Codable, Sendable, Equatable { var id: String; var body: String }

    /// Stands in for the service's upstream; counts its calls.
    actor ArticleAPI {
        private(set) var calls = 0

        func article(id: String) async throws -> Article {
            calls += 1
            return Article(id: id, body: "fetched \(id)")
        }
    }

    @Test("the two-tier example")
    func twoTiers() async throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let api = ArticleAPI()
        let article = Article(id: "a1", body: "text")

        // Two tiers. Codable values are stored as JSON unless another codec is given.
        let cache = try Cache<String, Article>(
            directory: root.url.appendingPathComponent("var/cache/myservice/articles"),
            configuration: .init(
                memory: .init(countLimit: 10_000, costLimit: 64 << 20, ageLimit: .seconds(300)),
                disk: .init(
                    countLimit: nil, costLimit: 1 << 30, ageLimit: .seconds(30 * 86_400),
                    freeSpaceLimit: 512 << 20)))

        cache["a1"] = article  // insert (memory now, disk shortly)
        #expect(cache.memory.contains("a1"))
        let same = cache["a1"]  // memory, else disk (then promoted)
        #expect(same == article)
        cache.memory.removeAll()
        #expect(cache["a1"] == article, "from disk (its write may still be queued)")
        #expect(cache.memory.contains("a1"), "promoted")

        cache.insert(article, forKey: "a2", cost: 2_048, expiresAfter: .seconds(600))  // per-entry TTL
        #expect(cache.memory.totalCost >= 2_048)
        cache.removeValue(forKey: "a2")
        #expect(cache["a2"] == nil)
        let known = cache.contains("a1")
        #expect(known)

        // Get-or-load: concurrent misses for one key run the loader once; errors are not cached.
        let fresh = try await cache.value(forKey: "a3") { try await api.article(id: "a3") }
        #expect(fresh == Article(id: "a3", body: "fetched a3"))
        _ = try await cache.value(forKey: "a3") { try await api.article(id: "a3") }
        #expect(await api.calls == 1)

        try cache.flush()  // every insert so far is committed (and synced) to disk
        let stored = try #require(try cache.disk?.data(forKey: "a3"))
        #expect(try JSONDecoder().decode(Article.self, from: Data(stored)) == fresh, "stored as JSON")
        #expect(cache.disk?.totalCount == 2)
        cache.close()  // flushes; later calls fail with a clear error, never crash
        #expect(throws: CacheError.closed) { try cache.flush() }
        #expect(cache["a1"] == nil)
    }

    @Test("each tier alone")
    func eachTierAlone() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let dir = root.url
        let payload = Data(sampleBytes(count: 10_000, compressible: true))

        // Each tier alone.
        let hot = MemoryCache<Int, [UInt8]>(configuration: .init(countLimit: 1_000))
        hot.insert([1, 2, 3], forKey: 7, cost: 3)
        #expect(hot[7] == [1, 2, 3])
        #expect(hot.totalCost == 3)
        let disk = try DiskCache(directory: dir, configuration: .init(costLimit: 256 << 20))
        try disk.setData([UInt8](payload), forKey: "k")
        let bytes: [UInt8]? = try disk.data(forKey: "k")
        #expect(bytes == [UInt8](payload))
        try disk.trim(toCount: 1_000); try disk.trim(toCost: 64 << 20); try disk.trim(toAge: .seconds(3_600))
        print(disk.totalCount, disk.totalCost)
        #expect(disk.totalCount == 1)
        #expect(disk.totalCost > 0 && disk.totalCost < payload.count, "compressed")
        disk.close()
    }
}
