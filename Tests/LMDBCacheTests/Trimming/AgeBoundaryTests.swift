import Foundation
import Testing

@testable import LMDBCache

/// "Idle for `age`" is one rule: the memory tier's age limit on lookups, the scheduler's passes and
/// `trim(toAge:)` in both tiers all count an entry last used exactly `age` ago as idle.
@Suite("An entry idle exactly the age is idle everywhere")
struct AgeBoundaryTests {
    @Test("trim(toAge:) keeps an entry idle a second less than the age and removes it at the age, in both tiers")
    func trimToAgeInBothTiers() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        var configuration = Cache<String, String>.Configuration()
        configuration.clock = clock.clock
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        let cache = try Cache(directory: dir.url, configuration: configuration)
        defer { cache.close() }
        cache["edge"] = "e"
        try cache.flush()
        let disk = try #require(cache.disk)

        clock.advance(by: .seconds(49))
        cache.trim(toAge: .seconds(50))
        #expect(cache.memory.totalCount == 1)
        #expect(disk.totalCount == 1)

        clock.advance(by: .seconds(1))
        cache.trim(toAge: .seconds(50))
        #expect(cache.memory.totalCount == 0)
        #expect(disk.totalCount == 0)
    }

    @Test("the memory tier's age limit misses an entry at the age, and its scheduler pass removes one at the age")
    func ageLimitLookupAndPassAgree() {
        let clock = ManualClock()
        var configuration = MemoryCache<String, Int>.Configuration(ageLimit: .seconds(50))
        configuration.clock = clock.clock
        configuration.automaticTrimming = false
        let cache = MemoryCache<String, Int>(configuration: configuration)
        cache["looked up"] = 1
        cache["trimmed"] = 2

        clock.advance(by: .seconds(49))
        #expect(cache.trimPass() == 0)
        #expect(cache.totalCount == 2)

        clock.advance(by: .seconds(1))
        #expect(cache["looked up"] == nil)
        #expect(cache.trimPass() == 1)
        #expect(cache.totalCount == 0)
    }

    @Test("the disk tier's scheduler pass removes an entry at its age limit, not before")
    func diskAgeLimitPass() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        var configuration = DiskCache.Configuration(ageLimit: .seconds(50))
        configuration.clock = clock.clock
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        try disk.setData(Array("v".utf8), forKey: "edge")
        try disk.flush()

        clock.advance(by: .seconds(49))
        disk.trimPass()
        #expect(disk.totalCount == 1)

        clock.advance(by: .seconds(1))
        disk.trimPass()
        #expect(disk.totalCount == 0)
    }
}
