import CacheTestSupport
import Foundation
import Testing

/// Four processes on one directory, each its own `cache-test-helper serve`, run a seeded random
/// sequence of puts, removals, tag removals, removals of everything and reads against their own
/// keys and shared ones. The test takes turns: one process acts per step and flushes before the
/// next acts, so commit order is step order and the test itself is the model.
///
/// Checked: a read by the process that last wrote or removed a key is that write (read your
/// writes across the other processes' changes); any other read is a value once written for its
/// key, or nothing; a tag removal counts exactly the model's tagged entries; and at the end of
/// each round (every process flushes, then every process follows the log) every process's memory
/// tier holds each key's model value or nothing, and every read equals the model.
@Suite("Coherence: four processes under a model", .serialized)
struct CoherenceModelTests {
    static let processCount = 4
    static let ownKeysPerProcess = 3
    static let sharedKeys = 5
    static let tags = ["t0", "t1", "t2"]

    /// The seed: `LMDBCACHE_COHERENCE_SEED` when set (to replay a failure), else fixed.
    static var seed: UInt64 {
        ProcessInfo.processInfo.environment["LMDBCACHE_COHERENCE_SEED"].flatMap { UInt64($0) } ?? 0xC0FFEE
    }

    static var rounds: Int {
        ProcessInfo.processInfo.environment["LMDBCACHE_COHERENCE_ROUNDS"].flatMap { Int($0) } ?? 12
    }

    static let stepsPerRound = 40

    static func ownKey(_ process: Int, _ index: Int) -> String { "p\(process)k\(index)" }
    static let allKeys: [String] =
        (0..<processCount).flatMap { process in (0..<ownKeysPerProcess).map { ownKey(process, $0) } }
        + (0..<sharedKeys).map { "s\($0)" }

    /// What the directory holds, committed: the last write of each key in commit order.
    struct Model {
        var values: [String: String] = [:]
        var tags: [String: Set<String>] = [:]
        /// Every value ever written under each key.
        var written: [String: Set<String>] = [:]
        /// The process whose own put, removal or removeAll last changed the key: its read must
        /// equal the model. Absent after a tag removal (the remover's memory may hold an older
        /// copy of the key, without the tag, that its follower drops on the next poll).
        var owner: [String: Int] = [:]

        mutating func put(_ key: String, _ value: String, tags: Set<String>, by process: Int) {
            values[key] = value
            self.tags[key] = tags
            written[key, default: []].insert(value)
            owner[key] = process
        }

        mutating func remove(_ key: String, by process: Int) {
            values[key] = nil
            tags[key] = nil
            owner[key] = process
        }

        /// Removes the keys carrying `tag`; returns how many.
        mutating func removeAll(taggedWith tag: String) -> Int {
            let tagged = tags.filter { $0.value.contains(tag) }.map(\.key)
            for key in tagged {
                values[key] = nil
                tags[key] = nil
                owner[key] = nil
            }
            return tagged.count
        }

        mutating func removeAll(by process: Int) {
            values = [:]
            tags = [:]
            for key in CoherenceModelTests.allKeys { owner[key] = process }
        }
    }

    @Test("every process's reads equal the model at each quiescent point")
    func fourProcesses() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        // Two follow on their timer as well as on `follow`, two only on `follow`.
        let servers = try (0..<Self.processCount).map { index in
            try CacheServer("P\(index)", directory: dir.url, poll: index < 2 ? "5" : CacheServer.followOnly)
        }
        var random = PowerLossRandom(seed: Self.seed)
        var model = Model()
        var step = 0
        let context = "seed \(Self.seed)"

        for round in 0..<Self.rounds {
            for _ in 0..<Self.stepsPerRound {
                step += 1
                let process = Int.random(in: 0..<Self.processCount, using: &random)
                let server = servers[process]
                let key =
                    Bool.random(using: &random)
                    ? Self.ownKey(process, Int.random(in: 0..<Self.ownKeysPerProcess, using: &random))
                    : "s\(Int.random(in: 0..<Self.sharedKeys, using: &random))"
                let place = "\(context), round \(round), step \(step), \(server.name)"
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<35:
                    let value = "\(key).\(step)"
                    let tags = Set(Self.tags.filter { _ in Int.random(in: 0..<3, using: &random) == 0 })
                    try server.put(key, value, tags: tags.sorted())
                    try server.flush()
                    model.put(key, value, tags: tags, by: process)
                case 35..<50:
                    try server.remove(key)
                    try server.flush()
                    model.remove(key, by: process)
                case 50..<60:
                    let tag = Self.tags.randomElement(using: &random)!
                    let removed = try server.removeAll(taggedWith: tag)
                    let expected = model.removeAll(taggedWith: tag)
                    #expect(removed == expected, "rmtag \(tag) removed \(removed), the model \(expected) (\(place))")
                case 60..<62:
                    try server.removeAll()
                    model.removeAll(by: process)
                default:
                    let read = try server.get(key)
                    if model.owner[key] == process {
                        #expect(read == model.values[key], "\(key) read back by its last writer (\(place))")
                    } else if let read {
                        #expect(model.written[key]?.contains(read) == true, "\(key) read \(read) (\(place))")
                    }
                }
            }
            // Quiescent: everything committed, then everything followed.
            for server in servers { try server.flush() }
            for server in servers { try server.follow() }
            for server in servers {
                for key in Self.allKeys {
                    let expected = model.values[key]
                    let cached = try server.mem(key)
                    #expect(
                        cached == nil || cached == expected,
                        "\(server.name)'s memory tier holds \(key) = \(cached ?? "-"), the model \(expected ?? "nothing") (\(context), after round \(round))"
                    )
                    #expect(
                        try server.get(key) == expected,
                        "\(server.name) reads \(key) (\(context), after round \(round))")
                }
            }
        }
        for server in servers {
            let counters = try server.counters()
            #expect(counters.memoryTierDrops == 0, "\(server.name): \(counters)")
            #expect(try server.quit() == 0, "\(server.name) closed cleanly")
        }
    }
}
