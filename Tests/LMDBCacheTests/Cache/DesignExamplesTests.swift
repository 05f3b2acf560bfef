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

    /// The upstream of the loading examples: articles that can fail, and tokens with a lifetime.
    actor Upstream {
        struct Token: Codable, Sendable, Equatable {
            var lifetime: Duration
            var isValid: Bool
        }

        var failing = false
        private(set) var articleCalls = 0
        private(set) var bulkCalls: [[String]] = []
        var token = Token(lifetime: .seconds(30), isValid: true)

        func fail(_ failing: Bool) { self.failing = failing }
        func issue(_ token: Token) { self.token = token }

        func article(id: String) throws -> Article {
            articleCalls += 1
            if failing { throw CacheError.notFound(key: id) }
            return Article(id: id, body: "fetched \(id) #\(articleCalls)")
        }

        func articles(ids: [String]) -> [String: Article] {
            bulkCalls.append(ids)
            var found: [String: Article] = [:]
            for id in ids where id != "a3" { found[id] = Article(id: id, body: "bulk \(id)") }
            return found
        }
    }

    @Test("the loading examples: freshness, the loader's context, bulk")
    func loading() async throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let clock = ManualClock()
        var configuration = Cache<String, Article>.Configuration()
        configuration.clock = clock.clock
        // The example's timeouts never fire on their own: a busy machine's slow load is not one.
        configuration.timeoutClock = ManualTimeoutClock()
        let cache = try Cache<String, Article>(directory: root.url, configuration: configuration)
        defer { cache.close() }
        let api = Upstream()

        // Freshness: refresh ahead, serve stale when the origin fails or is slow.
        func get() async throws -> Article {
            let article = try await cache.value(
                forKey: "a1", expiresAfter: .seconds(600),
                freshness: Freshness(
                    refreshAfter: .seconds(60), staleIfError: .seconds(3_600),
                    timeout: .milliseconds(250), hardTimeout: .seconds(5))
            ) { try await api.article(id: "a1") }
            return article
        }
        let first = try await get()
        #expect(first.body == "fetched a1 #1")
        clock.advance(by: .seconds(61))
        #expect(try await get() == first, "returned at once, reloaded in the background")
        await GetOrLoadTests.waitUntil { cache.statistics.refreshes == 1 }
        #expect(try await get().body == "fetched a1 #2")
        await api.fail(true)
        clock.advance(by: .seconds(700))
        #expect(cache["a1"] == nil, "expired for plain lookups")
        #expect(try await get().body == "fetched a1 #2", "stale, because the origin failed")

        do {
            // The loader decides its value's lifetime, or that it must not be cached.
            let tokens = try Cache<String, Upstream.Token>(
                directory: root.url.appendingPathComponent("tokens"),
                configuration: { () -> Cache<String, Upstream.Token>.Configuration in
                    var configuration = Cache<String, Upstream.Token>.Configuration()
                    configuration.clock = clock.clock
                    return configuration
                }())
            defer { tokens.close() }
            let cache = tokens
            let auth = api
            func token() async throws -> Upstream.Token {
                let token = try await cache.value(forKey: "token") { context in
                    let t = await auth.token
                    context.expiresAfter = t.lifetime
                    context.isCacheable = t.isValid
                    return t
                }
                return token
            }
            #expect(try await token().lifetime == .seconds(30))
            #expect(cache.metadata(forKey: "token").map { $0.expiresAt == $0.storedAt.addingTimeInterval(30) } == true)
            clock.advance(by: .seconds(30))
            #expect(cache["token"] == nil, "lived as long as the loader said")
            await api.issue(Upstream.Token(lifetime: .seconds(30), isValid: false))
            #expect(try await token().isValid == false)
            #expect(cache["token"] == nil, "an invalid token is not cached")
        }
    }

    @Test("the bulk example")
    func bulk() async throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let cache = try Cache<String, Article>(directory: root.url, configuration: .init())
        defer { cache.close() }
        let api = Upstream()
        cache["a1"] = Article(id: "a1", body: "cached")

        // Bulk: one loader call with exactly the keys both tiers missed.
        let articles: [String: Article] = try await cache.values(forKeys: ["a1", "a2", "a3"]) { missing in
            await api.articles(ids: missing)  // [String: Article]; keys it leaves out stay absent
        }
        #expect(articles == ["a1": Article(id: "a1", body: "cached"), "a2": Article(id: "a2", body: "bulk a2")])
        #expect(await api.bulkCalls == [["a2", "a3"]])
        #expect(cache["a3"] == nil)
    }

    @Test("the tags example: group invalidation in both tiers and in every cache sharing the directory")
    func tags() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let article = Article(id: "a1", body: "text")
        var configuration = Cache<String, Article>.Configuration()
        configuration.coherence = .init(pollInterval: .seconds(3_600))  // followed when the test says
        let cache = try Cache<String, Article>(directory: root.url, configuration: configuration)
        // Another process's cache on the directory; in this process, it follows the same change log.
        let elsewhere = try Cache<String, Article>(directory: root.url, configuration: configuration)
        defer {
            cache.close()
            elsewhere.close()
        }
        let other = Article(id: "a2", body: "other")
        cache.insert(other, forKey: "a2", tags: ["feed"])

        // Tags: group invalidation in both tiers and in every process sharing the directory.
        cache.insert(article, forKey: "a1", tags: ["author:42", "feed"])
        try cache.flush()
        elsewhere.followChanges()
        #expect(elsewhere["a1"] == article)
        #expect(elsewhere.memory.contains("a1"), "promoted in the other cache")
        #expect(cache.memory.contains("a1"))
        cache.removeAll(taggedWith: "author:42")
        #expect(!cache.memory.contains("a1"), "gone from memory")
        #expect(try cache.disk?.data(forKey: "a1") == nil, "gone from disk")
        #expect(cache["a1"] == nil)
        elsewhere.followChanges()
        #expect(!elsewhere.memory.contains("a1"), "gone from the other cache's memory")
        #expect(elsewhere["a1"] == nil)
        #expect(cache["a2"] == other && elsewhere["a2"] == other, "an entry without the tag stays")
    }
}
