import Foundation
import Testing

@testable import LMDBCache

/// Two caches on one directory in one process follow each other through the change log, as
/// processes do: the follower is polled by the test (`followChanges()`), never waited for.
@Suite("Coherence: two caches on one directory")
struct CoherenceSmokeTests {
    static func open(_ dir: TemporaryDirectory, coherence: Cache<String, String>.Coherence = .init())
        throws -> Cache<String, String>
    {
        var configuration = Cache<String, String>.Configuration()
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        configuration.coherence = coherence
        return try Cache(directory: dir.url, configuration: configuration)
    }

    @Test("an overwrite, a removal, a tag removal and removeAll in A reach B's memory tier")
    func overwriteRemoveTagAll() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        // Polled only by the test: a long interval keeps the timer out of the way.
        let a = try Self.open(dir, coherence: .init(pollInterval: .seconds(3_600)))
        let b = try Self.open(dir, coherence: .init(pollInterval: .seconds(3_600)))
        defer {
            a.close()
            b.close()
        }
        a.insert("1", forKey: "k", tags: ["t"])
        a.insert("x", forKey: "other", tags: ["t", "u"])
        try a.flush()
        #expect(b.value(forKey: "k") == "1")
        #expect(b.value(forKey: "other") == "x")
        #expect(b.memory.value(forKey: "k") == "1", "promoted")
        #expect(b.memory.tags(forKey: "other")?.tags == ["t", "u"], "promoted with its tags")

        a.insert("2", forKey: "k")
        try a.flush()
        #expect(b.memory.value(forKey: "k") == "1", "not yet followed")
        b.followChanges()
        #expect(b.memory.value(forKey: "k") == nil)
        #expect(b.value(forKey: "k") == "2")
        // A's first two writes came after B opened: B drops its copies of both.
        #expect(b.statistics.invalidationsReceived == 3)
        #expect(b.statistics.invalidationsApplied == 2)
        #expect(b.value(forKey: "other") == "x")

        #expect(a.removeAll(taggedWith: "u") == 1)
        #expect(b.memory.value(forKey: "other") == "x")
        b.followChanges()
        #expect(b.memory.value(forKey: "other") == nil)
        #expect(b.value(forKey: "other") == nil)

        a.removeValue(forKey: "k")
        try a.flush()
        b.followChanges()
        #expect(b.value(forKey: "k") == nil)

        b.insert("b", forKey: "mine")
        try b.flush()
        a.followChanges()
        #expect(a.value(forKey: "mine") == "b")
        a.removeAll()
        b.followChanges()
        #expect(b.value(forKey: "mine") == nil)
        // B's own changes are not applied to itself.
        b.insert("again", forKey: "mine")
        try b.flush()
        let before = b.statistics.invalidationsReceived
        b.followChanges()
        #expect(b.statistics.invalidationsReceived == before)
        #expect(b.memory.value(forKey: "mine") == "again")
    }
}
