import CacheTestSupport
import Foundation
import Synchronization
import Testing

@testable import LMDBCache

/// Two `Cache` instances on one directory in one process follow each other as processes do: a
/// reader instance's promotions race its follower's invalidations while the other instance
/// writes.
@Suite("Coherence: two caches in one process, reads racing invalidations")
struct SameProcessCoherenceRaceTests {
    /// Reader threads hammer `reader.value(forKey:)` (each miss reads the disk and promotes) while
    /// `writer` overwrites the key with growing numbers, flushing as it goes, and the reader's
    /// follower drops the key on its 5 ms timer. Each thread's numbers never go back; after the
    /// final flush and `followChanges()`, the reader returns the final number.
    @Test("a reader instance never goes back and ends on the writer's final value")
    func readersRacingInvalidations() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = Cache<String, Int>.Configuration()
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        let writer = try Cache<String, Int>(directory: dir.url, configuration: configuration)
        configuration.coherence = .init(pollInterval: .milliseconds(5))
        let reader = try Cache<String, Int>(directory: dir.url, configuration: configuration)
        defer {
            writer.close()
            reader.close()
        }
        let final = 2_000
        writer.insert(1, forKey: "k")
        try writer.flush()
        reader.followChanges()
        #expect(reader.value(forKey: "k") == 1)

        let stop = Atomic<Bool>(false)
        let findings = Mutex<[String]>([])
        let reads = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        let threads = 2
        let regressions = Atomic<Int>(0)
        /// Counts a read that went back, keeping the first few distinct ones.
        @Sendable func note(_ finding: String) {
            regressions.add(1, ordering: .relaxed)
            findings.withLock { if $0.count < 5 && !$0.contains(finding) { $0.append(finding) } }
        }
        for thread in 0..<threads {
            Thread.detachNewThread {
                var newest = 0
                var count = 0
                while !stop.load(ordering: .relaxed) {
                    count += 1
                    guard let value = reader.value(forKey: "k") else {
                        note("thread \(thread): nothing after \(newest)")
                        continue
                    }
                    if value < newest {
                        note("thread \(thread): \(value) after \(newest)")
                    }
                    newest = max(newest, value)
                }
                reads.add(count, ordering: .relaxed)
                done.signal()
            }
        }
        for number in 2...final {
            writer.insert(number, forKey: "k")
            if number % 3 == 0 { try writer.flush() }
        }
        try writer.flush()
        reader.followChanges()
        stop.store(true, ordering: .relaxed)
        for _ in 0..<threads { done.wait() }

        let wentBack = regressions.load(ordering: .relaxed)
        #expect(wentBack == 0, "\(wentBack) reads went back, e.g. \(findings.withLock { $0 })")
        #expect(reads.load(ordering: .relaxed) > 0)
        let cached = reader.memory.value(forKey: "k")
        #expect(
            cached == nil || cached == final, "the reader's memory tier holds \(cached.map(String.init) ?? "nothing")")
        #expect(reader.value(forKey: "k") == final)
        // The writer's changes after the reader's first follow, one per write.
        #expect(reader.statistics.invalidationsReceived == final)
        #expect(reader.statistics.memoryTierDrops == 0)
    }

    /// The interleaving the race above can hit, made deterministic by a codec that stops the
    /// decoding of a value read from disk (between the disk read and the promotion):
    ///
    /// 1. thread 1 misses memory and reads v1 from disk, and stops decoding it;
    /// 2. the writer instance commits v2 (the reader's follower has not polled yet);
    /// 3. thread 2 misses memory (the same shard generation) and reads v2, and stops decoding it;
    /// 4. thread 1 promotes v1: the generation has not moved, so it is stored;
    /// 5. thread 2's promotion of v2 is refused (thread 1's insert moved the generation), and it
    ///    returns v2.
    ///
    /// The reader instance has returned v2, yet its memory tier now holds v1 and serves it until
    /// its follower's next poll: a read after a read that returned v2 returns v1.
    @Test("a read never returns an older value than one a read before it returned")
    func refusedPromotionLeavesOlderValue() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = Cache<String, String>.Configuration()
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        configuration.coherence = .init(pollInterval: .seconds(3_600))  // polled by the test only
        let writer = try Cache<String, String>(directory: dir.url, configuration: configuration)
        let gates = DecodeGates(["v1", "v2"])
        configuration.codec = gates
        let reader = try Cache<String, String>(directory: dir.url, configuration: configuration)
        defer {
            writer.close()
            reader.close()
        }
        writer.insert("v1", forKey: "k")
        try writer.flush()
        reader.followChanges()

        let first = PendingOutcome<String?>()
        Thread.detachNewThread { first.finish(.success(reader.value(forKey: "k"))) }
        gates.waitUntilStopped(at: "v1")
        writer.insert("v2", forKey: "k")
        try writer.flush()
        let second = PendingOutcome<String?>()
        Thread.detachNewThread { second.finish(.success(reader.value(forKey: "k"))) }
        gates.waitUntilStopped(at: "v2")
        gates.release("v1")
        let firstRead = try #require(first.wait("thread 1 returning")).get()
        gates.release("v2")
        let secondRead = try #require(second.wait("thread 2 returning")).get()
        #expect(firstRead == "v1")
        #expect(secondRead == "v2")

        // A read after thread 2's, which returned v2.
        let later = reader.value(forKey: "k")
        #expect(later == "v2", "read v2, then \(later ?? "nothing"): the memory tier holds an older value")
        // Until the follower's next poll, which drops it.
        reader.followChanges()
        #expect(reader.memory.value(forKey: "k") == nil || reader.memory.value(forKey: "k") == "v2")
        #expect(reader.value(forKey: "k") == "v2")
    }
}

/// A string codec whose decode stops once for each of the given values until the test releases it.
final class DecodeGates: ValueCodec, Sendable {
    private let entered: [String: DispatchSemaphore]
    private let released: [String: DispatchSemaphore]
    private let armed: Mutex<Set<String>>

    init(_ values: [String]) {
        entered = Dictionary(uniqueKeysWithValues: values.map { ($0, DispatchSemaphore(value: 0)) })
        released = Dictionary(uniqueKeysWithValues: values.map { ($0, DispatchSemaphore(value: 0)) })
        armed = Mutex(Set(values))
    }

    func encode(_ value: String) throws -> [UInt8] { Array(value.utf8) }

    func decode(_ bytes: [UInt8]) throws -> String {
        let value = String(decoding: bytes, as: UTF8.self)
        if armed.withLock({ $0.remove(value) != nil }) {
            entered[value]?.signal()
            released[value]?.wait()
        }
        return value
    }

    /// Waits until a decode of `value` has stopped.
    func waitUntilStopped(at value: String) {
        entered[value]?.wait()
    }

    /// Lets the stopped decode of `value` go on.
    func release(_ value: String) {
        released[value]?.signal()
    }
}
