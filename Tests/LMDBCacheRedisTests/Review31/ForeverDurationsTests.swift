#if Redis
import CacheTestSupport
import Foundation
import LMDBCache
import LMDBCacheRedis
import Testing

/// Review of issue 31: every duration a user gives the Redis tier reaches a clock, a timer or a
/// command argument; "forever" (`.seconds(Int64.max)`) must work there as everywhere else.
@Suite("Review 31: the Redis tier's durations at their extremes", .serialized)
struct ForeverDurationsTests {
    @Test("a command timeout, breaker pause, lease hold and lease wait of forever: the tier works and nothing traps")
    func foreverDurations() async throws {
        let server = try await RedisServer()
        let forever = Duration.seconds(Int64.max)
        func machine() throws -> (Cache<String, String>, TemporaryDirectory) {
            let directory = TemporaryDirectory()
            var configuration = Cache<String, String>.Configuration()
            configuration.remote = .redis(
                RedisConfiguration(
                    endpoints: [.init(host: "127.0.0.1", port: server.port)], namespace: "forever",
                    commandTimeout: forever, openDuration: forever))
            configuration.freshness = Freshness(lease: LoadLease(holdFor: forever, waitFor: forever))
            return (try Cache<String, String>(directory: directory.url, configuration: configuration), directory)
        }
        let (one, d1) = try machine()
        let (two, d2) = try machine()
        defer {
            one.close()
            two.close()
            d1.remove()
            d2.remove()
        }
        // Loaded on one machine (under a lease held "forever", released once stored)...
        #expect(try await one.value(forKey: "k") { "loaded once" } == "loaded once")
        // ...sent to Redis (waited for as an event; the limit only reports a hang)...
        var polls = 0
        while (one.statistics.remote?.writes ?? 0) < 1 {
            polls += 1
            try #require(polls < 30_000, "hung: the loaded value never reached Redis")
            try await Task.sleep(for: .milliseconds(10))
        }
        // ...and served from Redis on the other, whose loader must not run.
        #expect(
            try await two.value(forKey: "k") {
                Issue.record("the value in Redis was not found")
                return "loaded twice"
            } == "loaded once")
        #expect(one.statistics.remote?.failures == 0)
        #expect(two.statistics.remote?.failures == 0)
    }
}
#endif
