#if Redis
import CacheTestSupport
import Foundation
import LMDBCache
@testable import LMDBCacheRedis
import Synchronization
import Testing

/// The versioned write protocol (issue 32): Redis keeps the newest write of a key whatever order
/// writes land in, a write Redis refuses publishes nothing and is retried, and what cannot land is
/// replaced by a removal. Real `redis-server` processes; each test named for the promise.
@Suite("Redis write protocol", .serialized)
struct WriteProtocolTests {
    typealias Machine = RemoteTierTests

    /// A cache on a directory of its own with the Redis tier on `server`, configured by `adjust`;
    /// its circuit opens only after 1,000 failures (these tests count refusals, not the breaker).
    static func machine(
        _ server: RedisServer, namespace: String = "t", adjust: (inout RedisConfiguration) -> Void = { _ in }
    ) async throws -> (Cache<String, String>, TemporaryDirectory) {
        try await Machine.machine(server, namespace: namespace, threshold: 1_000, adjust: adjust)
    }

    /// What Redis holds under `key`'s value key, decoded (a record's body stands in as one byte:
    /// redis-cli prints text, and the body is compressed binary).
    static func envelope(_ server: RedisServer, _ key: String, namespace: String = "t") throws -> RedisEnvelope? {
        let reply = try server.cli(["EXISTS", "\(namespace):v:\(key)"])
        guard reply.trimmingCharacters(in: .whitespacesAndNewlines) == "1" else { return nil }
        let header = try server.cli(["GETRANGE", "\(namespace):v:\(key)", "0", "\(RedisEnvelope.headerCount - 1)"])
        let bytes = Array(header.trimmingCharacters(in: .whitespacesAndNewlines).utf8.prefix(RedisEnvelope.headerCount))
        if bytes.starts(with: RedisEnvelope.tombstoneMagic) {
            return RedisEnvelope(Array(bytes.prefix(RedisEnvelope.tombstoneCount)))
        }
        return RedisEnvelope(bytes + [0])
    }

    /// Runs the write script on `t:v:k` through redis-cli: `value` at `version`, set-if-absent when
    /// `loadStart` is given; its reply ("1" stored, "0" not).
    static func write(
        _ server: RedisServer, _ value: String, version: RecordVersion, loadStart: UInt64? = nil
    ) throws -> String {
        try server.cli([
            "EVAL", String(decoding: RedisScripts.write, as: UTF8.self), "2", "t:v:k", "t:f",
            String(decoding: version.encoded, as: UTF8.self),
            String(decoding: RedisEnvelope.storing(Array(value.utf8), version: version, expires: 0), as: UTF8.self),
            "0", "t:changes", "x",
            loadStart.map { String(decoding: RecordVersion(milliseconds: $0).encoded, as: UTF8.self) } ?? "",
            "\(CacheChange.wallClockNow())",
        ]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs the tombstone script on `t:v:k` through redis-cli at `version` (60 s, published
    /// nowhere); its reply ("1" stored, "0" not).
    static func tombstone(_ server: RedisServer, version: RecordVersion) throws -> String {
        try server.cli([
            "EVAL", String(decoding: RedisScripts.tombstone, as: UTF8.self), "1", "t:v:k",
            String(decoding: version.encoded, as: UTF8.self),
            String(decoding: RedisEnvelope.tombstone(version: version), as: UTF8.self), "60000", "", "",
        ]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs the tag script on `t:t:tag` (versions in `t:tv:tag`) through redis-cli for `member`, a
    /// write made at `made` (ms) whose fences last `life` ms, of `version` (nil: the first of the
    /// millisecond `made`); its reply ("1" added, "0" there already, "-1" fenced out by a later
    /// removal of the tag).
    static func indexTag(
        _ server: RedisServer, _ member: String, keepUntil: UInt64, made: UInt64, life: UInt64 = 60_000,
        version: RecordVersion? = nil
    ) throws -> String {
        let version = version ?? RecordVersion(milliseconds: made)
        return try server.cli([
            "EVAL", String(decoding: RedisScripts.tag, as: UTF8.self), "2", "t:t:tag", "t:tv:tag", member,
            "\(keepUntil)", "\(made)", "\(life)", String(decoding: version.encoded, as: UTF8.self),
        ]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs the unindex script on `t:t:tag` through redis-cli: a removal of `version` takes
    /// `members` off; its reply (how many it took off).
    static func unindexTag(_ server: RedisServer, _ members: [String], version: RecordVersion) throws -> String {
        try server.cli(
            [
                "EVAL", String(decoding: RedisScripts.unindex, as: UTF8.self), "2", "t:t:tag", "t:tv:tag",
                String(decoding: version.encoded, as: UTF8.self),
            ] + members
        ).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Returns once the wall clock has passed the millisecond it reads now: a change made after it
    /// has a version of a later millisecond than one made before, whatever the origins.
    static func nextMillisecond() async {
        let now = CacheChange.wallClockNow()
        await waitFor("the wall clock moved past \(now) ms") { CacheChange.wallClockNow() > now }
    }

    /// Runs the tag fence script on `t:t:tag`: a removal made at `made` (ms), its fence lasting `life` ms.
    static func fenceTag(_ server: RedisServer, made: UInt64, life: UInt64 = 60_000) throws -> String {
        try server.cli([
            "EVAL", String(decoding: RedisScripts.fence, as: UTF8.self), "2", "t:t:tag", "t:tv:tag", "\(made)",
            "\(life)",
        ]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("A value Redis refuses for want of memory is never served from Redis in its old form; it lands once memory is back")
    func refusedWriteNeverServesTheOldValue() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server)
        let (two, d2) = try await Self.machine(server)
        defer {
            d1.remove()
            d2.remove()
        }
        one.insert("v1", forKey: "k")
        await Machine.wait(two, "machine two heard of v1") { $0.changesReceived >= 1 }
        #expect(try await two.value(forKey: "k", load: { "loaded" }) == "v1")

        // Full: every write that may grow memory is refused (-OOM), reads and PUBLISH are not.
        _ = try server.cli(["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        _ = try server.cli(["CONFIG", "SET", "maxmemory", "1"])
        one.insert("v2", forKey: "k")
        await Machine.wait(one, "the refused write was replaced by a removal that landed") {
            $0.writesRefused >= 1 && $0.pendingWrites == 0
        }
        #expect((one.statistics.remote?.writesDropped ?? 0) >= 1)
        // Redis holds the removal's tombstone, not v1: machine two, told of the change, loads.
        guard case .tombstone = try Self.envelope(server, "k") else {
            Issue.record("Redis should hold a tombstone for k")
            return
        }
        await Machine.wait(two, "machine two heard of the removal") { $0.changesReceived >= 2 }
        #expect(try await two.value(forKey: "k", load: { "loaded" }) == "loaded")

        _ = try server.cli(["CONFIG", "SET", "maxmemory", "0"])
        one.insert("v3", forKey: "k")
        await Machine.wait(two, "machine two heard of v3") { $0.changesReceived >= 3 }
        #expect(try await two.value(forKey: "k", load: { "loaded again" }) == "v3")
    }

    @Test("A write refused by a replica (-READONLY) is retried with backoff and lands once the node is a primary again")
    func readOnlyRefusalIsRetried() async throws {
        let server = try await RedisServer()
        let primary = try await RedisServer()
        let (one, d1) = try await Self.machine(server)
        let (two, d2) = try await Self.machine(server)
        defer {
            d1.remove()
            d2.remove()
        }
        // A failover seen from the old primary: it is now a replica, refusing writes.
        _ = try server.cli(["REPLICAOF", "127.0.0.1", "\(primary.port)"])
        one.insert("v1", forKey: "k")
        await Machine.wait(one, "Redis refused the write") { $0.writesRefused >= 1 }
        #expect(one.statistics.remote?.pendingWrites == 1)
        _ = try server.cli(["REPLICAOF", "NO", "ONE"])
        await Machine.wait(one, "the write landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        await Machine.wait(two, "machine two heard of it") { $0.changesReceived >= 1 }
        let loader = RemoteTierTests.CountingLoader()
        #expect(try await two.value(forKey: "k", load: loader.load("loaded")) == "v1")
        #expect(loader.runs.load(ordering: .relaxed) == 0)
    }

    @Test("A replayed or late write older than what Redis holds changes nothing and publishes nothing")
    func olderWriteLoses() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server)
        defer { d1.remove() }
        one.insert("v2", forKey: "k")
        await Machine.wait(one, "the write landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        guard case .record(let newest, _, _)? = try Self.envelope(server, "k") else {
            Issue.record("Redis should hold a record for k")
            return
        }
        // The same write again (a retry after a lost reply): found there already (2); an older
        // one (another machine's write that arrives late): refused (0). Neither changes anything
        // or publishes.
        let older = RecordVersion(milliseconds: newest.milliseconds - 1, origin: 7)
        #expect(try Self.write(server, "old", version: newest) == "2")
        #expect(try Self.write(server, "old", version: older) == "0")
        guard case .record(let kept, _, _)? = try Self.envelope(server, "k") else {
            Issue.record("Redis should still hold a record for k")
            return
        }
        #expect(kept == newest)
        // A tombstone older than the value leaves it too; one of the value's own version replaces
        // it (the dropped write made safe), once; a newer one replaces that.
        let newer = RecordVersion(milliseconds: newest.milliseconds + 1)
        for (version, expected) in [(older, "0"), (newest, "1"), (newest, "0"), (newer, "1")] {
            #expect(try Self.tombstone(server, version: version) == expected)
        }
        // And a removed key is not resurrected by a write from before the removal.
        #expect(try Self.write(server, "old", version: newest) == "0")
        guard case .tombstone = try Self.envelope(server, "k") else {
            Issue.record("Redis should hold the tombstone")
            return
        }
    }

    @Test("A load's set-if-absent does not store over a removal made after the load began")
    func setIfAbsentRespectsLaterRemoval() async throws {
        let server = try await RedisServer()
        let removal = RecordVersion(milliseconds: 2_000_000, origin: 1)
        #expect(try Self.tombstone(server, version: removal) == "1")
        func setIfAbsent(loadStart: UInt64, version: RecordVersion) throws -> String {
            try Self.write(server, "loaded", version: version, loadStart: loadStart)
        }
        // Began before the removal, stored after it: not stored.
        #expect(try setIfAbsent(loadStart: 1_999_999, version: RecordVersion(milliseconds: 2_000_005, origin: 2)) == "0")
        // Began after it: stored; and a second one finds a value: not stored.
        #expect(try setIfAbsent(loadStart: 2_000_001, version: RecordVersion(milliseconds: 2_000_006, origin: 2)) == "1")
        #expect(try setIfAbsent(loadStart: 2_000_002, version: RecordVersion(milliseconds: 2_000_007, origin: 3)) == "0")
    }

    @Test("A record larger than maximumRecordSize is not sent, its key is removed there, and other writes go on")
    func oversizedRecordIsRefusedUpFront() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server) { $0.maximumRecordSize = 2_000 }
        defer { d1.remove() }
        one.insert("small", forKey: "big")
        await Machine.wait(one, "the small value landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        // Random letters: zlib cannot bring them under the limit.
        var generator = SystemRandomNumberGenerator()
        let large = String((0..<20_000).map { _ in Character(Unicode.Scalar(UInt8.random(in: 65...122, using: &generator))) })
        one.insert(large, forKey: "big")
        one.insert("after", forKey: "other")
        await Machine.wait(one, "both writes settled") { $0.pendingWrites == 0 && $0.writes >= 3 }
        #expect(one.statistics.remote?.writesRefused == 1)
        guard case .tombstone = try Self.envelope(server, "big") else {
            Issue.record("Redis should hold a tombstone for the large value's key, not the small value")
            return
        }
        guard case .record = try Self.envelope(server, "other") else {
            Issue.record("the write after the large one should have landed")
            return
        }
    }

    @Test("removeAll() removes the cache's own keys only, not other keys sharing the prefix")
    func removeAllStaysInItsNamespace() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server, namespace: "articles")
        defer { d1.remove() }
        one.insert("v", forKey: "k", tags: ["tag"])
        await Machine.wait(one, "the write landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        for key in ["articles:v2:x", "articles:other", "articlesx"] { _ = try server.cli(["SET", key, "keep"]) }
        one.removeAll()
        await Machine.wait(one, "the removal landed") { $0.pendingWrites == 0 && $0.writes >= 2 }
        for key in ["articles:v2:x", "articles:other", "articlesx"] {
            #expect(try server.cli(["GET", key]).trimmingCharacters(in: .whitespacesAndNewlines) == "keep", "\(key)")
        }
        guard case .tombstone = try Self.envelope(server, "k", namespace: "articles") else {
            Issue.record("the cache's value should be a tombstone")
            return
        }
    }
}

/// The pieces of the protocol on their own: versions, the change feed, the write queue.
@Suite("Redis write protocol: parts")
struct WriteProtocolPartsTests {
    @Test("Versions encode and decode exactly, order by time, counter, origin, and reject foreign bytes")
    func versions() {
        let versions = [
            RecordVersion(milliseconds: 0), RecordVersion(milliseconds: 1, counter: 0, origin: .max),
            RecordVersion(milliseconds: 1, counter: 1, origin: 0), RecordVersion(milliseconds: 2),
            RecordVersion(milliseconds: RecordVersion.maximumMilliseconds, counter: .max, origin: .max),
        ]
        for (index, version) in versions.enumerated() {
            #expect(RecordVersion(encoded: version.encoded) == version)
            for later in versions[(index + 1)...] {
                #expect(version < later)
                // The scripts' order: the encoded fields compare as the versions do.
                #expect(version.encoded.lexicographicallyPrecedes(later.encoded))
            }
        }
        #expect(RecordVersion(encoded: Array("0123456789abcdef0123456789abcdeF".utf8)) == nil)
        #expect(RecordVersion(encoded: Array("0123".utf8)) == nil)
        #expect(RedisEnvelope(Array("LCR1short".utf8)) == .foreign)
        #expect(RedisEnvelope(Array("hello, world, a value of another program".utf8)) == .foreign)
        let version = RecordVersion(milliseconds: 5, origin: 9)
        #expect(
            RedisEnvelope(RedisEnvelope.storing([1, 2, 3], version: version, expires: 77))
                == .record(version, expires: 77, [1, 2, 3][...]))
        #expect(RedisEnvelope(Array(RedisEnvelope.storing([], version: version, expires: 0).dropLast())) == .foreign)
        #expect(RedisEnvelope(RedisEnvelope.tombstone(version: version)) == .tombstone(version))
        #expect(RedisEnvelope(RedisEnvelope.tombstone(version: version) + [0]) == .foreign)
    }

    @Test("The version clock only grows, whatever the wall clock does, and follows versions it reads")
    func versionClock() {
        let wall = Mutex<UInt64>(1_000)
        let clock = VersionClock(origin: 3) { wall.withLock { $0 } }
        var last = clock.next()
        for step in [5, -3, 0, 0, 100, -1_000] as [Int64] {
            wall.withLock { $0 = UInt64(Int64($0) + step) }
            let next = clock.next()
            #expect(last < next)
            last = next
        }
        clock.observe(RecordVersion(milliseconds: 50_000, counter: 4, origin: 1))
        #expect(clock.next() > RecordVersion(milliseconds: 50_000, counter: 4, origin: 1))
        // A version far ahead of the wall clock (a wrong clock, a foreign value) is ignored.
        clock.observe(RecordVersion(milliseconds: RecordVersion.maximumMilliseconds))
        #expect(clock.next().milliseconds < 1_000_000)
        // 65,536 versions in one millisecond: the clock borrows the next one and still grows.
        var previous = clock.next()
        for _ in 0..<70_000 {
            let next = clock.next()
            #expect(previous < next)
            previous = next
        }
    }

    @Test("Changes received after a missed mark, and before it, reach the follower after the mark")
    func changesSurviveAMissedMark() throws {
        let feed = RedisChangeFeed(origin: 1)
        let before = CacheChange(kind: .key, origin: 2, time: 1, subject: Array("a".utf8))
        let after = CacheChange(kind: .key, origin: 2, time: 2, subject: Array("b".utf8))
        feed.deliver(before.encoded)
        feed.markMissed()
        feed.deliver(after.encoded)
        guard case .missed = try feed.receive() else {
            Issue.record("the mark comes first")
            return
        }
        guard case .changes(let changes) = try feed.receive() else {
            Issue.record("then the changes")
            return
        }
        #expect(changes.map(\.subject) == [Array("a".utf8), Array("b".utf8)])
    }

    @Test("A removal of everything supersedes the removals of everything queued before it, and nothing else")
    func removeAllSupersedesQueuedRemoveAlls() async throws {
        let queue = RedisWriteQueue(limit: 10)
        let version = RecordVersion(milliseconds: 10, origin: 1)
        let set = RedisWrite.set(
            key: Array("k1".utf8), record: [1], keepUntil: 0, tags: [], absentSince: nil, version: version, queuedAt: 10)
        let tagRemoval = RedisWrite.removeTag(Array("t".utf8), version: version)
        let release = RedisWrite.release(key: Array("k9".utf8), token: [7])
        let newest = RedisWrite.removeAll(version: RecordVersion(milliseconds: 12, origin: 1))
        for write in [.removeAll(version: version), set, tagRemoval, .removeAll(version: RecordVersion(milliseconds: 11, origin: 1)), release, newest] {
            queue.push(write)
        }
        #expect(queue.unsent == 4)
        let batch = try #require(await queue.next(upTo: 10))
        #expect(batch == [set, tagRemoval, release, newest])
        queue.finished(batch)
        #expect(queue.unsent == 0)
        #expect(!queue.mayHideUnsentChange(forKey: Array("k1".utf8)))
        #expect(queue.dropped == 0, "superseded removals are not counted as dropped")
    }

    @Test("A write dropped for room still hides Redis's value of its key until its tombstone is sent")
    func droppedWriteKeepsItsKeyHidden() async throws {
        let queue = RedisWriteQueue(limit: 1)
        let k1 = Array("k1".utf8)
        let version = RecordVersion(milliseconds: 10, origin: 1)
        queue.push(.remove(key: k1, version: version))
        queue.push(.set(key: Array("k2".utf8), record: [1], keepUntil: 0, tags: [], absentSince: nil, version: version, queuedAt: 10))
        #expect(queue.dropped == 1)
        #expect(queue.mayHideUnsentChange(forKey: k1))
        let batch = try #require(await queue.next(upTo: 10))
        #expect(batch.contains(.remove(key: k1, version: version)))
        #expect(queue.mayHideUnsentChange(forKey: k1))
        queue.finished(batch)
        #expect(!queue.mayHideUnsentChange(forKey: k1))
        #expect(queue.unsent == 0)
    }
}
#endif
#if Redis
extension WriteProtocolTests {
    @Test("A tag's set shrinks with its values: members whose life ended are trimmed on the next add")
    func tagSetsShrink() async throws {
        let server = try await RedisServer()
        let now = CacheChange.wallClockNow()
        func add(_ member: String, keepUntil: UInt64) throws {
            #expect(try Self.indexTag(server, member, keepUntil: keepUntil, made: now) != "-1")
        }
        // The review's case scaled down: keys written again and again, each living a short while.
        // Trimming goes by Redis's clock: 40 members whose lives have ended, 10 still living.
        for round in 0..<4 {
            for key in 0..<10 { try add("r\(round)k\(key)", keepUntil: now - 1_000 + UInt64(round)) }
        }
        for key in 0..<10 { try add("live\(key)", keepUntil: now + 600_000) }
        #expect(try server.cli(["ZCARD", "t:t:tag"]).trimmingCharacters(in: .whitespacesAndNewlines) == "10")
        // A key written again keeps one member; one kept forever keeps the set alive.
        try add("live0", keepUntil: 0)
        #expect(try server.cli(["ZCARD", "t:t:tag"]).trimmingCharacters(in: .whitespacesAndNewlines) == "10")
        #expect(try server.cli(["PTTL", "t:t:tag"]).trimmingCharacters(in: .whitespacesAndNewlines) == "-1")
        // A late, older write of a key does not shorten its member's life (ZADD GT).
        try add("late", keepUntil: now + 900_000)
        try add("late", keepUntil: now + 700_000)
        #expect(
            try server.cli(["ZSCORE", "t:t:tag", "late"]).trimmingCharacters(in: .whitespacesAndNewlines)
                == "\(now + 900_000)")
    }

    @Test("A tag removal leaves a newer value of a member, and its membership, in place")
    func tagRemovalSparesNewerValues() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server)
        defer { d1.remove() }
        // Another machine's value of k, written after the removal below is made (a version ahead),
        // and indexed under the tag.
        let later = RecordVersion(milliseconds: CacheChange.wallClockNow() + 30_000, origin: 99)
        _ = try server.cli([
            "SET", "t:v:k", String(decoding: RedisEnvelope.storing(Array("newer".utf8), version: later, expires: 0), as: UTF8.self),
        ])
        _ = try server.cli(["ZADD", "t:t:tag", "+inf", "k"])
        one.insert("mine", forKey: "other", tags: ["tag"])
        await Machine.wait(one, "the tagged write landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        one.removeAll(taggedWith: "tag")
        await Machine.wait(one, "the tag removal landed") { $0.pendingWrites == 0 && $0.writes >= 2 }
        guard case .record(let kept, _, _)? = try Self.envelope(server, "k") else {
            Issue.record("the newer value should stay")
            return
        }
        #expect(kept == later)
        #expect(try server.cli(["ZSCORE", "t:t:tag", "k"]).trimmingCharacters(in: .whitespacesAndNewlines) == "inf")
        #expect(try server.cli(["ZSCORE", "t:t:tag", "other"]).trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        guard case .tombstone = try Self.envelope(server, "other") else {
            Issue.record("the older tagged value should be removed")
            return
        }
    }
}
#endif
#if Redis
extension WriteProtocolPartsTests {
    @Test("A configuration printed, debug-printed or dumped never shows its password")
    func configurationRedactsPassword() {
        let configuration = RedisConfiguration(
            endpoints: [.init(host: "10.0.0.5", port: 6379)], password: "s3cr3t-passw0rd", namespace: "articles")
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in ["\(configuration)", String(reflecting: configuration), dumped] {
            #expect(!text.contains("s3cr3t"), "\(text)")
            #expect(text.contains("10.0.0.5:6379"))
        }
    }
}
#endif
#if Redis
/// The subscriber's buffer is bounded, and its overflow is a missed mark, not a silent loss.
@Suite("Redis write protocol: the subscriber's bound")
struct SubscriberBoundTests {
    @Test("Messages beyond the subscriber's buffer are lost only with a resubscription that reports them missed")
    func overflowIsReportedMissed() async throws {
        let server = try await RedisServer()
        defer { server.stop() }
        let subscriptions = Recorder<Bool>()
        let delivered = Recorder<[UInt8]>()
        let gate = DispatchSemaphore(value: 0)
        let channel = Array("changes".utf8)
        let subscriber = try RedisSubscriber(
            configuration: server.configuration(), channel: channel, logger: testLogger, bufferLimit: 4,
            onMessage: { payload in
                delivered.record(payload)
                // The first message holds the consumer until the rest have arrived.
                if payload == Array("0".utf8) { _ = gate.wait(timeout: .now() + hangBound.timeInterval) }
            },
            onSubscribed: { subscriptions.record($0) })
        subscriber.start()
        await waitFor("subscribed") { subscriptions.all == [false] }
        let publisher = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        let replies = try await publisher.execute(
            (0..<20).map { RedisCommand("PUBLISH", channel, Array("\($0)".utf8)) }, timeout: hangBound)
        #expect(replies.allSatisfy { $0 == .integer(1) })
        // Held on the first message, or not yet running when the burst arrived (a busy machine: the
        // event loop hands over all 20 before the consumer takes one), the consumer cannot keep up
        // with 20 messages through a buffer of 4.
        await waitFor("messages were lost past the buffer") { subscriber.messagesLost > 0 }
        gate.signal()
        await waitFor("it resubscribed and said messages may have been missed") { subscriptions.all == [false, true] }
        #expect(delivered.all.count < 20)
        await subscriber.close()
        await publisher.close()
    }
}
#endif
#if Redis
extension WriteProtocolTests {
    @Test("A bulk get-or-load serves other machines' values from Redis and loads only the rest, stored set-if-absent")
    func bulkReadsRedis() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server)
        let (two, d2) = try await Self.machine(server)
        defer {
            d1.remove()
            d2.remove()
        }
        one.insert("one's a", forKey: "a")
        one.insert("one's b", forKey: "b")
        await Machine.wait(two, "machine two heard of both") { $0.changesReceived >= 2 }
        let asked = Recorder<[String]>()
        let values = try await two.values(forKeys: ["a", "b", "c"]) { keys in
            asked.record(keys.sorted())
            return Dictionary(uniqueKeysWithValues: keys.map { ($0, "loaded \($0)") })
        }
        #expect(values == ["a": "one's a", "b": "one's b", "c": "loaded c"])
        #expect(asked.all == [["c"]])
        // The loaded value went to Redis: machine one reads it there without loading.
        await Machine.wait(two, "c reached Redis") { $0.pendingWrites == 0 && $0.writes >= 1 }
        let loader = RemoteTierTests.CountingLoader()
        #expect(try await one.value(forKey: "c", load: loader.load("one's own c")) == "loaded c")
        #expect(loader.runs.load(ordering: .relaxed) == 0)
    }
}
#endif
#if Redis
extension WriteProtocolTests {
    @Test("Nothing is read from Redis before the cache can hear of changes: until its first subscription, lookups miss there")
    func noReadBeforeSubscription() async throws {
        let server = try await RedisServer()
        // A user who may run every command but subscribe to no channel: its subscriber's
        // SUBSCRIBE is refused (-NOPERM) until the channels are granted.
        let granted = try server.cli(["ACL", "SETUSER", "deaf", "on", ">pw", "~*", "resetchannels", "+@all"])
        #expect(granted.trimmingCharacters(in: .whitespacesAndNewlines) == "OK")
        let (one, d1) = try await Self.machine(server)
        let directory = TemporaryDirectory()
        defer {
            d1.remove()
            directory.remove()
        }
        var redis = RedisConfiguration(
            endpoints: [.init(host: "127.0.0.1", port: server.port)], password: "pw", namespace: "t",
            commandTimeout: .milliseconds(200), failureThreshold: 1_000)
        redis.username = "deaf"
        var configuration = Cache<String, String>.Configuration()
        configuration.remote = .redis(redis)
        let deaf = try Cache<String, String>(directory: directory.url, configuration: configuration)
        defer { deaf.close() }

        one.insert("one's a", forKey: "a")
        one.insert("one's b", forKey: "b")
        await Machine.wait(one, "a and b reached Redis") { $0.pendingWrites == 0 && $0.writes >= 2 }
        // Not subscribed: what Redis holds is not read (it could change unannounced); the loader runs.
        #expect(try await deaf.value(forKey: "a", load: { "deaf's a" }) == "deaf's a")
        let bulk = try await deaf.values(forKeys: ["b"]) { keys in
            Dictionary(uniqueKeysWithValues: keys.map { ($0, "deaf's \($0)") })
        }
        #expect(bulk == ["b": "deaf's b"])
        let before = deaf.statistics.remote ?? RemoteStatistics()
        #expect(before.hits == 0)
        #expect(before.isSubscribed == false)
        // Its loaded values did not replace one's in Redis (set-if-absent).
        guard case .record = try Self.envelope(server, "a") else {
            Issue.record("Redis should still hold one's record of a")
            return
        }

        // Channels granted: the subscriber's next attempt subscribes, and lookups read Redis.
        _ = try server.cli(["ACL", "SETUSER", "deaf", "allchannels"])
        await Machine.wait(deaf, "the cache subscribed once its user may") { $0.isSubscribed }
        one.insert("one's c", forKey: "c")
        await Machine.wait(one, "c reached Redis") { $0.pendingWrites == 0 && $0.writes >= 3 }
        #expect(try await deaf.value(forKey: "c", load: { "deaf's c" }) == "one's c")
        #expect((deaf.statistics.remote?.hits ?? 0) >= 1)
    }
}
#endif
#if Redis
extension WriteProtocolTests {
    @Test("A tag removal fences out writes of the tag made in an earlier millisecond; its own millisecond passes; the fence ends")
    func tagFence() async throws {
        let server = try await RedisServer()
        let now = CacheChange.wallClockNow()
        #expect(try Self.fenceTag(server, made: now) == "1")
        // Made before the removal: out. In its millisecond (this machine's own later write, as a
        // version's counter orders it) or after: indexed.
        #expect(try Self.indexTag(server, "k", keepUntil: 0, made: now - 1) == "-1")
        #expect(try Self.indexTag(server, "k", keepUntil: 0, made: now) == "1")
        #expect(try Self.indexTag(server, "j", keepUntil: 0, made: now + 1) == "1")
        #expect(try server.cli(["ZSCORE", "t:t:tag", "k"]).trimmingCharacters(in: .whitespacesAndNewlines) == "inf")
        // An older fence does not replace a newer one.
        #expect(try Self.fenceTag(server, made: now - 10) == "1")
        #expect(try server.cli(["ZSCORE", "t:t:tag", ""]).trimmingCharacters(in: .whitespacesAndNewlines) == "\(now)")
        // Past its life (by Redis's clock) the fence is trimmed, and older writes are indexed again.
        _ = try server.cli(["DEL", "t:t:tag"])
        #expect(try Self.indexTag(server, "k", keepUntil: 0, made: now) == "1")
        #expect(try Self.fenceTag(server, made: now - 120_000, life: 1_000) == "1")
        #expect(try Self.indexTag(server, "old", keepUntil: 0, made: now - 200_000, life: 1_000) == "1")
        #expect(try server.cli(["ZSCORE", "t:t:tag", ""]).trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        // A set left with its fence alone lives as long as the fence, not forever.
        _ = try server.cli(["DEL", "t:t:tag"])
        #expect(try Self.indexTag(server, "forever", keepUntil: 0, made: now) == "1")
        #expect(try Self.fenceTag(server, made: now + 1) == "1")
        _ = try server.cli(["ZREM", "t:t:tag", "forever"])
        #expect(try Self.fenceTag(server, made: now + 1) == "1")
        let ttl = Int(try server.cli(["PTTL", "t:t:tag"]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -9
        #expect(ttl > 0 && ttl <= 60_001, "the fence alone keeps the set for its life: \(ttl) ms")
    }

    @Test("A newer write indexed between a tag removal's tombstone and its unindexing keeps its membership")
    func unindexKeepsNewerMember() async throws {
        let server = try await RedisServer()
        let now = CacheChange.wallClockNow()
        let removal = RecordVersion(milliseconds: now, counter: 1, origin: 1)
        let newer = RecordVersion(milliseconds: now, counter: 2, origin: 2)
        // The review's order (A3): W indexes k, R fences and tombstones k (k held nothing newer),
        // R takes k off the set, W's value lands over R's tombstone. Unconditional, the ZREM
        // left W's value outside its tag, and the next removal of the tag missed it.
        #expect(try Self.indexTag(server, "k", keepUntil: 0, made: now, version: newer) == "1")
        #expect(try Self.fenceTag(server, made: now) == "1")
        #expect(try Self.tombstone(server, version: removal) == "1")
        #expect(try Self.unindexTag(server, ["k"], version: removal) == "0")
        #expect(try Self.write(server, "w", version: newer) == "1")
        #expect(try server.cli(["ZSCORE", "t:t:tag", "k"]).trimmingCharacters(in: .whitespacesAndNewlines) == "inf")
        // A later removal finds k, and (W not newer than it) takes it off, with its version.
        let later = RecordVersion(milliseconds: now, counter: 3, origin: 1)
        #expect(try Self.unindexTag(server, ["k"], version: later) == "1")
        #expect(try server.cli(["ZSCORE", "t:t:tag", "k"]).trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        #expect(try server.cli(["HEXISTS", "t:tv:tag", "k"]).trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        // An older write indexed after a newer one leaves the newer version noted.
        #expect(try Self.indexTag(server, "j", keepUntil: 0, made: now, version: newer) == "1")
        #expect(try Self.indexTag(server, "j", keepUntil: 0, made: now, version: removal) == "0")
        #expect(try Self.unindexTag(server, ["j"], version: removal) == "0")
        // Indexed after the removal's tombstone, in its millisecond (the fence lets it by) and
        // newer: kept, and its value lands.
        _ = try server.cli(["DEL", "t:v:k", "t:t:tag", "t:tv:tag"])
        let fenced = RecordVersion(milliseconds: now, counter: 4, origin: 1)
        let after = RecordVersion(milliseconds: now, counter: 5, origin: 2)
        #expect(try Self.fenceTag(server, made: now) == "1")
        #expect(try Self.tombstone(server, version: fenced) == "1")
        #expect(try Self.indexTag(server, "k", keepUntil: 0, made: now, version: after) == "1")
        #expect(try Self.unindexTag(server, ["k"], version: fenced) == "0")
        #expect(try Self.write(server, "w2", version: after) == "1")
        #expect(try server.cli(["ZSCORE", "t:t:tag", "k"]).trimmingCharacters(in: .whitespacesAndNewlines) == "inf")
        // A member with no version noted (a set an older release wrote) is taken off as before.
        _ = try server.cli(["ZADD", "t:t:tag", "+inf", "old"])
        #expect(try Self.unindexTag(server, ["old"], version: removal) == "1")
    }

    @Test("A tag's version hash shrinks and ends with its set")
    func tagVersionsFollowTheirSet() async throws {
        let server = try await RedisServer()
        let now = CacheChange.wallClockNow()
        // Ended members leave the hash when the next add trims them.
        #expect(try Self.indexTag(server, "live", keepUntil: now + 600_000, made: now) == "1")
        for key in 0..<5 { #expect(try Self.indexTag(server, "gone\(key)", keepUntil: now - 1_000, made: now) != "-1") }
        #expect(try server.cli(["HLEN", "t:tv:tag"]).trimmingCharacters(in: .whitespacesAndNewlines) == "2")
        #expect(try Self.indexTag(server, "live2", keepUntil: now + 600_000, made: now) == "1")
        #expect(try server.cli(["HLEN", "t:tv:tag"]).trimmingCharacters(in: .whitespacesAndNewlines) == "2")
        #expect(try server.cli(["HEXISTS", "t:tv:tag", "gone4"]).trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        // The hash expires with the set.
        let setTTL = Int(try server.cli(["PTTL", "t:t:tag"]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -9
        let hashTTL = Int(try server.cli(["PTTL", "t:tv:tag"]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -9
        #expect(setTTL > 0 && hashTTL > 0 && abs(setTTL - hashTTL) <= 1_000, "set \(setTTL) ms, hash \(hashTTL) ms")
        // A member kept forever keeps both.
        #expect(try Self.indexTag(server, "forever", keepUntil: 0, made: now) == "1")
        #expect(try server.cli(["PTTL", "t:tv:tag"]).trimmingCharacters(in: .whitespacesAndNewlines) == "-1")
        // A backlog of ended members is trimmed a bounded step (256) per add, not all at once.
        let backlog = (0..<600).map { "ended\($0)" }
        _ = try server.cli(["ZADD", "t:t:tag"] + backlog.flatMap { ["\(now - 1_000)", $0] })
        _ = try server.cli(["HSET", "t:tv:tag"] + backlog.flatMap { [$0, "v"] })
        func count(_ command: String, _ key: String) throws -> String {
            try server.cli([command, key]).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // live, live2, forever and 600 ended; each add trims 256 and adds its own member.
        #expect(try count("ZCARD", "t:t:tag") == "603")
        #expect(try Self.indexTag(server, "a", keepUntil: 0, made: now) == "1")
        #expect(try count("ZCARD", "t:t:tag") == "\(603 - 256 + 1)")
        #expect(try count("HLEN", "t:tv:tag") == "\(603 - 256 + 1)")
        #expect(try Self.indexTag(server, "b", keepUntil: 0, made: now) == "1")
        #expect(try Self.indexTag(server, "c", keepUntil: 0, made: now) == "1")
        #expect(try count("ZCARD", "t:t:tag") == "6", "the backlog is gone after three adds")
        #expect(try count("HLEN", "t:tv:tag") == "6")
    }

    @Test("A tag removal followed at once by a write of the tag on the same machine keeps the write")
    func writeAfterTagRemovalLands() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server)
        let (two, d2) = try await Self.machine(server)
        defer {
            d1.remove()
            d2.remove()
        }
        for round in 0..<20 {
            one.removeAll(taggedWith: "tag")
            one.insert("new \(round)", forKey: "k", tags: ["tag"])
        }
        await Machine.wait(one, "every write landed") { $0.pendingWrites == 0 && $0.writes >= 40 }
        guard case .record? = try Self.envelope(server, "k") else {
            Issue.record("the last insert, made after the last removal, should be in Redis")
            return
        }
        #expect(one.value(forKey: "k") == "new 19")
        #expect(try await two.value(forKey: "k", load: { "loaded" }) == "new 19")
    }

    @Test("A fenced write leaves its key removed, not the value it replaced")
    func fencedWriteRemovesItsKey() async throws {
        let pair = try await PartitionedPair()
        defer { pair.close() }
        let (server, proxy, one, two) = (pair.server, pair.proxy, pair.one, pair.two)
        // An older value without the tag, in Redis and in both machines.
        one.insert("old", forKey: "k")
        await Machine.wait(one, "the old value landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        proxy.stall()
        one.insert("one's", forKey: "k", tags: ["tag"])
        await waitFor("machine one's write is held by the partition") { proxy.heldBytes > 0 }
        await Self.nextMillisecond()
        // Made in a later millisecond than the write.
        two.removeAll(taggedWith: "tag")
        await Machine.wait(two, "the tag removal landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        proxy.resume()
        await Machine.wait(one, "machine one's write was settled") { $0.pendingWrites == 0 }
        if case .record? = try Self.envelope(server, "k") {
            Issue.record("the fenced write, or the value it replaced, is in Redis")
        }
        let loader = RemoteTierTests.CountingLoader()
        #expect(try await two.value(forKey: "k", load: loader.load("loaded")) == "loaded")
    }

    @Test("A tagged write older than a tag removal, reaching Redis only after it, does not land")
    func tagRemovalFencesLateWrite() async throws {
        let pair = try await PartitionedPair()
        defer { pair.close() }
        let (server, proxy, one, two) = (pair.server, pair.proxy, pair.one, pair.two)
        proxy.stall()
        one.insert("one's", forKey: "k", tags: ["tag"])
        await waitFor("machine one's write is held by the partition") { proxy.heldBytes > 0 }
        await Self.nextMillisecond()
        // The removal is made after the write (a newer version) and lands first; k is not in the
        // tag's set yet, so its scan cannot find it.
        two.removeAll(taggedWith: "tag")
        await Machine.wait(two, "the tag removal landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        proxy.resume()
        await Machine.wait(one, "machine one's write was settled") { $0.pendingWrites == 0 }
        if case .record? = try Self.envelope(server, "k") {
            Issue.record("the write the tag removal covered landed after it")
        }
        let loader = RemoteTierTests.CountingLoader()
        #expect(try await two.value(forKey: "k", load: loader.load("loaded")) == "loaded")
        #expect(loader.runs.load(ordering: .relaxed) == 1)
    }
}
#endif
#if Redis
extension WriteProtocolTests {
    @Test("A tagged load that began before a tag removal and reaches Redis after it does not land there")
    func tagRemovalFencesLateLoad() async throws {
        let pair = try await PartitionedPair()
        defer { pair.close() }
        let (server, proxy, one, two) = (pair.server, pair.proxy, pair.one, pair.two)
        let load = await GatedTaggedLoad(one, value: "one's load")
        // Machine one hears nothing and sends nothing from here; the removal is made, in a later
        // millisecond than the load's start, and lands while its loader runs.
        proxy.stall()
        await Self.nextMillisecond()
        two.removeAll(taggedWith: "tag")
        await Machine.wait(two, "the tag removal landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        #expect(try await load.finish() == "one's load")
        await waitFor("machine one's write is held by the partition") { proxy.heldBytes > 0 }
        await Self.nextMillisecond()
        proxy.resume()
        await Machine.wait(one, "machine one's write was settled") { $0.pendingWrites == 0 }
        if case .record? = try Self.envelope(server, "k") {
            Issue.record("a load the tag removal covered landed after it")
        }
    }

    @Test("An insert made right after a load of its key replaces the loaded value in Redis, every time")
    func insertAfterLoadWins() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server)
        let (two, d2) = try await Self.machine(server)
        defer {
            d1.remove()
            d2.remove()
        }
        // A load and an insert well within one millisecond: the insert's version must be newer
        // than the load's (versioned by the clock's reading when the load began).
        let rounds = 200
        for round in 0..<rounds {
            #expect(try await one.value(forKey: "k\(round)", load: { "loaded" }) == "loaded")
            one.insert("inserted", forKey: "k\(round)")
        }
        await Machine.wait(one, "every write was settled") { $0.pendingWrites == 0 }
        var loaded: [Int] = []
        for round in 0..<rounds where try await two.value(forKey: "k\(round)", load: { "two's" }) != "inserted" {
            loaded.append(round)
        }
        #expect(loaded.isEmpty, "Redis kept the load over the insert made after it in rounds \(loaded)")
        #expect((one.statistics.remote?.writesDropped ?? 0) == 0)
    }

    @Test(
        "A load or reload whose loader ran longer than writeRetryLimit still reaches Redis",
        arguments: [LoadPolicy.useCacheElseLoad, .reloadIgnoringCache])
    func slowLoadLands(policy: LoadPolicy) async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server) { $0.writeRetryLimit = .milliseconds(300) }
        let (two, d2) = try await Self.machine(server)
        defer {
            d1.remove()
            d2.remove()
        }
        if policy == .reloadIgnoringCache {
            one.insert("old", forKey: "k")
            await Machine.wait(one, "the old value reached Redis") { $0.pendingWrites == 0 && $0.writes >= 1 }
        }
        let began = CacheChange.wallClockNow()
        let value = try await one.value(forKey: "k", policy: policy) {
            // The loader runs past the retry limit (by the wall clock the limit is measured on).
            await waitFor("the wall clock passed the retry limit") { CacheChange.wallClockNow() > began + 600 }
            return "slow"
        }
        #expect(value == "slow")
        await Machine.wait(one, "the loaded value was settled") { $0.pendingWrites == 0 }
        #expect((one.statistics.remote?.writesDropped ?? 0) == 0, "the slow load was dropped")
        #expect(try await two.value(forKey: "k", load: { "two's" }) == "slow")
    }

    @Test("A load that began before another machine's tag removal, and reached Redis first, is removed by it")
    func tagRemovalCoversLoadThatLandedFirst() async throws {
        let pair = try await PartitionedPair()
        defer { pair.close() }
        let (server, proxy, one, two) = (pair.server, pair.proxy, pair.one, pair.two)
        // Machine two (no partition) loads k with the tag; its loader waits.
        let load = await GatedTaggedLoad(two, value: "two's load")
        // Machine one, partitioned, removes the tag in a later millisecond: held at the proxy.
        proxy.stall()
        await Self.nextMillisecond()
        one.removeAll(taggedWith: "tag")
        await waitFor("machine one's removal is held by the partition") { proxy.heldBytes > 0 }
        // The load ends after the removal was made, and lands in Redis before it.
        await Self.nextMillisecond()
        #expect(try await load.finish() == "two's load")
        await Machine.wait(two, "two's load reached Redis") { $0.pendingWrites == 0 && $0.writes >= 1 }
        guard case .record? = try Self.envelope(server, "k") else {
            Issue.record("machine two's load should have reached Redis")
            return
        }
        // The partition heals: the removal lands and covers the load, which began before it.
        // Versioned when it finished, the load was newer than the removal and outlived it.
        proxy.resume()
        await Machine.wait(one, "machine one's removal was settled") { $0.pendingWrites == 0 }
        await Machine.wait(two, "machine two heard of the removal") { $0.changesReceived >= 1 }
        if case .record? = try Self.envelope(server, "k") {
            Issue.record("a load that began before the tag removal outlived it in Redis")
        }
        #expect(try await two.value(forKey: "k", load: { "reloaded" }) == "reloaded")
    }
}
#endif
#if Redis
extension WriteProtocolTests {
    @Test("removeAll()'s fence refuses writes not newer than it, and loads that began before it, on keys its scan never saw")
    func namespaceFence() async throws {
        let server = try await RedisServer()
        let removal = RecordVersion(milliseconds: CacheChange.wallClockNow(), origin: 5)
        func fence(_ version: RecordVersion) throws -> String {
            try server.cli([
                "EVAL", String(decoding: RedisScripts.namespaceFence, as: UTF8.self), "1", "t:f",
                String(decoding: version.encoded, as: UTF8.self), "60000",
            ]).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try fence(removal) == "1")
        #expect(try fence(RecordVersion(milliseconds: removal.milliseconds - 1)) == "0", "an older fence leaves a newer one")
        // Older, and the removal's own version: out. A load whose version is newer but which began
        // before the removal: out. Began after it: stored.
        #expect(try Self.write(server, "old", version: RecordVersion(milliseconds: removal.milliseconds - 1)) == "0")
        #expect(try Self.write(server, "tie", version: removal) == "0")
        let later = RecordVersion(milliseconds: removal.milliseconds + 1, origin: 1)
        #expect(try Self.write(server, "load", version: later, loadStart: removal.milliseconds - 1) == "0")
        #expect(try Self.write(server, "load", version: later, loadStart: removal.milliseconds + 1) == "1")
        #expect(try Self.write(server, "newer", version: RecordVersion(milliseconds: removal.milliseconds + 2)) == "1")
    }

    @Test("A write older than removeAll(), reaching Redis only after it, does not land")
    func removeAllFencesLateWrite() async throws {
        let pair = try await PartitionedPair()
        defer { pair.close() }
        let (server, proxy, one, two) = (pair.server, pair.proxy, pair.one, pair.two)
        proxy.stall()
        one.insert("one's", forKey: "k")
        await waitFor("machine one's write is held by the partition") { proxy.heldBytes > 0 }
        await Self.nextMillisecond()
        // Made after the write, landing first: its scan cannot find k, which is not in Redis yet.
        two.removeAll()
        await Machine.wait(two, "the removal of everything landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        proxy.resume()
        await Machine.wait(one, "machine one's write was settled") { $0.pendingWrites == 0 }
        if case .record? = try Self.envelope(server, "k") {
            Issue.record("the write removeAll() covered landed after it")
        }
        let loader = RemoteTierTests.CountingLoader()
        #expect(try await two.value(forKey: "k", load: loader.load("loaded")) == "loaded")
        #expect(loader.runs.load(ordering: .relaxed) == 1)
    }
}

extension WriteProtocolPartsTests {
    @Test("The namespace's fence keys: one per hash slot, each in its slot; one key when the namespace has a hash tag")
    func namespaceFenceKeys() {
        let keys = SlotKeys(Array("articles:f".utf8), cluster: true).everyKey()
        #expect(keys.count == HashSlot.count)
        #expect(keys.indices.allSatisfy { HashSlot.slot(of: keys[$0]) == $0 })
        #expect(keys.allSatisfy { $0.starts(with: Array("articles:f:{".utf8)) })
        let tagged = SlotKeys(Array("{app}:f".utf8), cluster: true)
        let value = Array("{app}:v:some key".utf8)
        #expect(HashSlot.slot(of: tagged.key(beside: value)) == HashSlot.slot(of: value))
        #expect(Set(tagged.everyKey()).count == 1)
        let single = SlotKeys(Array("articles:f".utf8), cluster: false)
        #expect(single.everyKey() == [Array("articles:f".utf8)])
        #expect(single.key(beside: Array("articles:v:k".utf8)) == Array("articles:f".utf8))
    }

    @Test("A tag's version hash sits in its set's hash slot, whatever braces the tag or the namespace hold")
    func tagVersionKeysBesideTheirSets() {
        for namespace in ["articles", "{app}", "a{b", "x}y", "a{", "{x}{}"] {
            #expect(SlotKeys.suffixesKeepSlot(Array(namespace.utf8)))
            let keys = RedisKeys(namespace: namespace)
            let slots = SlotKeys(keys.namespace + Array(":tv".utf8), cluster: true)
            for tag in ["plain", "{a}", "a}b{c", "{", "}", "", "{}"] {
                let tagKey = keys.tag(Array(tag.utf8))
                let versions = slots.key(beside: tagKey) + Array(":".utf8) + Array(tag.utf8)
                #expect(
                    HashSlot.slot(of: versions) == HashSlot.slot(of: tagKey),
                    "namespace \(namespace), tag \(tag): \(String(decoding: versions, as: UTF8.self))")
            }
        }
        // An empty hash tag first: Redis hashes whole keys, and no prefix can place a suffixed key.
        for namespace in ["{}x", "a{}b", "{}"] { #expect(!SlotKeys.suffixesKeepSlot(Array(namespace.utf8))) }
    }

    @Test("A cluster's namespace with an empty hash tag is refused with a clear error")
    func emptyHashTagNamespaceRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        var redis = RedisConfiguration(endpoints: [.init(host: "127.0.0.1", port: 1)], namespace: "{}x")
        redis.cluster = true
        var configuration = Cache<String, String>.Configuration()
        configuration.remote = .redis(redis)
        #expect {
            _ = try Cache<String, String>(directory: directory.url, configuration: configuration)
        } throws: { error in
            guard case CacheError.invalidConfiguration(let reason) = error else { return false }
            return reason.contains("empty hash tag")
        }
    }
}
#endif
#if Redis
/// A get-or-load of `k` with the tag `tag` whose loader waits, started on `cache` and returned
/// once the loader runs; ``finish()`` lets the loader return `value` and gives the call's result.
struct GatedTaggedLoad {
    private let load: Task<String, any Error>
    private let release: AsyncStream<Void>.Continuation

    init(_ cache: Cache<String, String>, value: String) async {
        let (started, starting) = AsyncStream<Void>.makeStream()
        let (released, release) = AsyncStream<Void>.makeStream()
        load = Task {
            try await cache.value(forKey: "k") { context in
                context.tags = ["tag"]
                starting.yield()
                for await _ in released { break }
                return value
            }
        }
        self.release = release
        for await _ in started { break }
    }

    func finish() async throws -> String {
        release.yield()
        return try await load.value
    }
}
#endif
#if Redis
/// Two machines on one redis-server: `one` reaches it through `proxy` (a partition the test opens
/// with `proxy.stall()`) with a 300 ms command timeout, `two` directly; both subscribed.
final class PartitionedPair {
    let server: RedisServer
    let proxy: StallingProxy
    let one: Cache<String, String>
    let two: Cache<String, String>
    private let directories: [TemporaryDirectory]

    init() async throws {
        let server = try await RedisServer()
        let proxy = try StallingProxy(upstreamPort: server.port)
        let (one, d1) = try await WriteProtocolTests.machine(server) {
            $0.endpoints = [.init(host: "127.0.0.1", port: proxy.port)]
            $0.commandTimeout = .milliseconds(300)
        }
        let (two, d2) = try await WriteProtocolTests.machine(server)
        (self.server, self.proxy, self.one, self.two, directories) = (server, proxy, one, two, [d1, d2])
    }

    func close() {
        proxy.stop()
        for directory in directories { directory.remove() }
    }
}
#endif
