import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

/// Processes sharing a directory follow each other's changes through the change log: real
/// processes (`cache-test-helper serve`), real LMDB. A test learns that a change was applied from
/// `follow` (the helper polls the log synchronously) or from the follower's counters, never from
/// time passing.
@Suite("Coherence: processes sharing a directory", .serialized)
struct CrossProcessCoherenceTests {
    /// What process A does to k after B has promoted it.
    enum Change: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case overwrite, remove, removeTag, removeAll
        var testDescription: String { rawValue }
    }

    @Test("once B follows, its memory tier no longer holds what A changed", arguments: Change.allCases)
    func followedChange(_ change: Change) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let a = try CacheServer("A", directory: dir.url, poll: CacheServer.followOnly)
        let b = try CacheServer("B", directory: dir.url, poll: CacheServer.followOnly)
        try a.put("k", "v1", tags: ["t"])
        try a.put("other", "x", tags: ["u"])
        try a.flush()
        try b.follow()  // A's two writes: nothing in B's memory to drop yet
        #expect(try b.counters() == .init(received: 2, applied: 0, memoryTierDrops: 0))
        #expect(try b.get("k") == "v1")
        #expect(try b.get("other") == "x")
        #expect(try b.mem("k") == "v1", "promoted")
        #expect(try b.mem("other") == "x", "promoted")

        let expected: String?
        switch change {
        case .overwrite:
            try a.put("k", "v2")
            expected = "v2"
        case .remove:
            try a.remove("k")
            expected = nil
        case .removeTag:
            #expect(try a.removeAll(taggedWith: "t") == 1)
            expected = nil
        case .removeAll:
            try a.removeAll()
            expected = nil
        }
        try a.flush()
        #expect(try b.mem("k") == "v1", "B has not read the change log yet (its timer is an hour away)")
        try b.follow()
        #expect(try b.mem("k") == nil, "B dropped what A changed")
        #expect(try b.get("k") == expected)
        #expect(try b.mem("k") == expected, "the current value (or nothing) was promoted")
        let otherSurvives = change != .removeAll
        #expect(try b.mem("other") == (otherSurvives ? "x" : nil), "only what A changed was dropped")
        #expect(try b.get("other") == (otherSurvives ? "x" : nil))
        #expect(
            try b.counters()
                == .init(received: 3, applied: change == .removeAll ? 2 : 1, memoryTierDrops: 0))
        // A reads nothing of its own back as a change.
        try a.follow()
        #expect(try a.counters() == .init(received: 0, applied: 0, memoryTierDrops: 0))
        #expect(try a.quit() == 0)
        #expect(try b.quit() == 0)
    }

    @Test("with only its timer, B converges on each of A's changes")
    func timerOnly() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let a = try CacheServer("A", directory: dir.url, poll: "off")
        let b = try CacheServer("B", directory: dir.url)  // the default: every 5 ms
        var received = 0
        /// A's change is committed; B's timer must apply it.
        func converged() throws {
            try a.flush()
            received += 1
            let counters = try b.waitForReceived(received)
            #expect(counters.received == received, "B received A's changes one by one: \(counters)")
        }

        try a.put("k", "v1", tags: ["t"])
        try converged()
        #expect(try b.get("k") == "v1")
        #expect(try b.mem("k") == "v1")

        try a.put("k", "v2", tags: ["t"])
        try converged()
        #expect(try b.mem("k") == nil, "overwrite")
        #expect(try b.get("k") == "v2")
        #expect(try b.mem("k") == "v2")

        try a.remove("k")
        try converged()
        #expect(try b.mem("k") == nil, "removal")
        #expect(try b.get("k") == nil)

        try a.put("k", "v3", tags: ["t"])
        try converged()
        #expect(try b.get("k") == "v3")
        #expect(try b.mem("k") == "v3")
        #expect(try a.removeAll(taggedWith: "t") == 1)
        try converged()
        #expect(try b.mem("k") == nil, "tag removal")
        #expect(try b.get("k") == nil)

        try a.put("k", "v4")
        try converged()
        #expect(try b.get("k") == "v4")
        #expect(try b.mem("k") == "v4")
        try a.removeAll()
        try converged()
        #expect(try b.mem("k") == nil, "removeAll")
        #expect(try b.get("k") == nil)
        #expect(try b.counters().memoryTierDrops == 0)
        #expect(try a.quit() == 0)
        #expect(try b.quit() == 0)
    }

    /// B is exactly as far behind as the log keeps, then one change further.
    @Test("a process the log left behind drops its memory tier and stays correct")
    func fallsBehind() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let capacity = Int(DiskStore.changeLogCapacity)
        let a = try CacheServer("A", directory: dir.url, poll: "off")
        let b = try CacheServer("B", directory: dir.url, poll: CacheServer.followOnly)
        for index in 0..<4 { try a.put("k\(index)", "old\(index)", tags: ["t"]) }
        try a.flush()
        try b.follow()
        for index in 0..<4 {
            #expect(try b.get("k\(index)") == "old\(index)")
            #expect(try b.mem("k\(index)") == "old\(index)", "promoted")
        }
        let before = try b.counters()

        // Exactly `capacity` changes since B's position: all still in the log.
        try a.put("k0", "new0")
        try expectOK(a.ask("churn \(capacity - 1)"), "A's churn")
        try b.follow()
        let kept = try b.counters()
        #expect(kept.memoryTierDrops == 0, "B was no further behind than the log keeps: \(kept)")
        #expect(kept.received - before.received == capacity, "\(kept)")
        #expect(try b.mem("k0") == nil, "k0's change was applied")
        #expect(try b.mem("k1") == "old1", "the rest of B's memory tier stays")

        // One more than the log keeps.
        try a.remove("k1")
        try a.put("k2", "new2")
        try expectOK(a.ask("churn \(capacity - 1)"), "A's churn")
        try b.follow()
        let dropped = try b.counters()
        #expect(dropped.memoryTierDrops == 1, "\(dropped)")
        for index in 0..<4 {
            #expect(try b.mem("k\(index)") == nil, "B's memory tier was dropped whole (k\(index))")
        }
        #expect(try b.get("k0") == "new0")
        #expect(try b.get("k1") == nil)
        #expect(try b.get("k2") == "new2")
        #expect(try b.get("k3") == "old3")
        #expect(try b.get("churn\(capacity - 2)") == "\(capacity - 2)")
        // Following goes on from the head: the next change is received as one.
        try a.put("k3", "new3")
        try a.flush()
        try b.follow()
        let after = try b.counters()
        #expect(after.received == dropped.received + 1, "\(after)")
        #expect(after.memoryTierDrops == 1)
        #expect(try b.get("k3") == "new3")
        #expect(try a.quit() == 0)
        #expect(try b.quit() == 0)
    }

    /// B's timer drops k while two of B's threads read it (and promote it from disk) as fast as
    /// they can and A overwrites it with growing numbers: a promotion racing an invalidation must
    /// lose, so B never reads a number smaller than one it read before, and ends on A's last.
    @Test("reads racing invalidations in B never go back and end on A's final value")
    func promotionRace() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let final = 3_000
        let a = try CacheServer("A", directory: dir.url, poll: "off")
        let b = try CacheServer("B", directory: dir.url)
        try expectOK(a.ask("count k 1 1"), "A's first write")
        _ = try b.waitForReceived(1)
        try expectOK(b.ask("hammer k 2"), "B's readers")
        // Flushing after every other write: single writes and pairs per commit.
        try expectOK(a.ask("count k \(final) 2"), "A's writes")
        try b.follow()
        let tally = try b.ask("hammer-stop")
        let words = tally.split(separator: " ")
        try #require(words.count == 6 && words[0] == "reads", "hammer-stop answered \(tally)")
        #expect(Int(words[1]).map { $0 > 0 } == true, "B read: \(tally)")
        #expect(words[3] == "0", "B read a value older than one it had read: \(tally)")
        #expect(words[5] == "0", "B read a value A never wrote: \(tally)")
        let cached = try b.mem("k")
        #expect(cached == nil || cached == "\(final)", "B's memory tier holds \(cached ?? "nothing")")
        #expect(try b.get("k") == "\(final)")
        // One change per write (the write-behind queue keeps every write): A's first, then `final`.
        #expect(try b.counters().received == final + 1, "B received every one of A's changes")
        #expect(try a.quit() == 0)
        #expect(try b.quit() == 0)
    }

    private func expectOK(_ answer: String, _ what: String) throws {
        guard answer == "ok" else { throw CacheServer.Failure(description: "\(what) answered \"\(answer)\"") }
    }
}
