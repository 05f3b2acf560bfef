import Foundation
import Testing

@testable import LMDBCache

/// Records with a stale window (format 3): past `expires` only a read that asks for stale entries
/// finds them, and trimming removes them at `staleUntil`.
@Suite("Stale windows")
struct StaleWindowTests {
    /// A disk cache on `clock`, trimmed only when a test says so, recording every use.
    static func open(_ dir: TemporaryDirectory, _ clock: ManualClock) throws -> DiskCache {
        var configuration = DiskCache.Configuration()
        configuration.clock = clock.clock
        configuration.automaticTrimming = false
        configuration.accessTimeGranularity = .zero
        return try DiskCache(directory: dir.url, configuration: configuration)
    }

    /// Queues `value` under `key`, written now, expiring `expiresIn` ms from now and kept until
    /// `staleFor` ms after that (0: no window).
    static func write(
        _ disk: DiskCache, _ value: [UInt8], _ key: String, expiresIn: UInt64, staleFor: UInt64
    ) throws {
        let now = disk.nowMilliseconds
        try disk.enqueue(
            try disk.prepareWrite(
                value, forKey: Array(key.utf8), now: now, expires: expiresIn == 0 ? 0 : now + expiresIn,
                staleUntil: staleFor == 0 ? 0 : now + expiresIn + staleFor))
    }

    /// The times of the expiry index's entries, in order.
    static func expiryIndex(_ disk: DiskCache) throws -> [UInt64] {
        let store = disk.store
        return try store.env.read { txn in
            var times: [UInt64] = []
            try txn.forEach(store.db.expiry) { key, _ in
                times.append(DiskDatabases.parseIndexKey(Array(key)).time)
                return true
            }
            return times
        }
    }

    /// How the record is written and whether it is still queued while it is read.
    enum Mode: String, CaseIterable, CustomTestStringConvertible {
        /// Committed before the reads.
        case committed
        /// Queued, encoded by the caller (an incompressible value).
        case queuedRecord
        /// Queued, left to the writer to deflate (a compressible value).
        case queuedDeferred
        var testDescription: String { rawValue }
    }

    /// The trims that remove expired entries.
    enum Trim: String, CaseIterable, CustomTestStringConvertible {
        case removeExpired, trimPass, trimToAge
        var testDescription: String { rawValue }

        func run(_ disk: DiskCache) throws {
            switch self {
            case .removeExpired: try disk.removeExpired()
            case .trimPass: disk.trimPass()
            case .trimToAge: try disk.trim(toAge: .seconds(3_600))
            }
        }
    }

    @Test(
        "an entry with a stale window is served until expires, then only to stale reads, and trimmed at staleUntil",
        arguments: Mode.allCases, Trim.allCases)
    func lifecycle(mode: Mode, trim: Trim) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        let key = Array("k".utf8)
        let value = sampleBytes(count: 2_000, compressible: mode == .queuedDeferred)
        let start = disk.nowMilliseconds
        let expires = start + 10_000
        let staleUntil = start + 30_000

        // Until the first trim, the reads see the write queued (or committed, as the mode says).
        try disk.store.env.writer.sync {
            try Self.write(disk, value, "k", expiresIn: 10_000, staleFor: 20_000)
            switch (mode, disk.store.pending(try StorageKey(key))) {
            case (.committed, _): try disk.flush()
            case (.queuedRecord, .set?), (.queuedDeferred, .setDeflatingLater?): break
            case (_, let pending): Issue.record("queued as \(String(describing: pending))")
            }
            clock.advance(by: .seconds(5))
            #expect(try disk.data(forKey: key) == value)
            #expect(try disk.containsData(forKey: key))
            let live = try #require(try disk.entry(forKey: key, includingStale: true))
            #expect(!live.isStale)
            #expect((live.value, live.created, live.expires, live.staleUntil) == (value, start, expires, staleUntil))
            #expect(try disk.entry(forKey: key)?.expires == expires)
            #expect(try disk.metadata(forKey: key).map { [$0.created, $0.expires] } == [start, expires])

            // At expires: expired to every plain read, stale to the read that asks.
            clock.advance(by: .seconds(5))
            #expect(try disk.data(forKey: key) == nil)
            #expect(try !disk.containsData(forKey: key))
            #expect(try disk.entry(forKey: key) == nil)
            #expect(try disk.entry(forKey: key, includingStale: false) == nil)
            #expect(try disk.metadata(forKey: key) == nil)
            let stale = try #require(try disk.entry(forKey: key, includingStale: true))
            #expect(stale.isStale)
            #expect(
                (stale.value, stale.created, stale.expires, stale.staleUntil) == (value, start, expires, staleUntil))
            if mode != .committed { #expect(disk.store.pending(try StorageKey(key)) != nil, "still queued") }
        }

        // Within the window, trims keep it.
        clock.advance(by: .seconds(19))
        try trim.run(disk)
        #expect(disk.totalCount == 1, "kept until staleUntil")
        #expect(try disk.entry(forKey: key, includingStale: true)?.isStale == true)
        #expect(try disk.data(forKey: key) == nil)
        #expect(try Self.expiryIndex(disk) == [staleUntil])

        // At staleUntil no read finds it, and trims remove it.
        clock.advance(by: .seconds(1))
        #expect(try disk.entry(forKey: key, includingStale: true) == nil)
        #expect(try disk.data(forKey: key) == nil)
        #expect(disk.totalCount == 1, "not trimmed yet")
        try trim.run(disk)
        #expect(disk.totalCount == 0)
        #expect(try Self.expiryIndex(disk) == [])
        #expect(try disk.verify().isClean)
    }

    @Test("a stale read and a metadata read record no access; a live read does")
    func staleReadsAreNoUse() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        let key = Array("k".utf8)
        try Self.write(disk, [1, 2, 3], "k", expiresIn: 10_000, staleFor: 20_000)
        try disk.flush()
        let written = try #require(try disk.storedEntry(forKey: key)).accessed

        clock.advance(by: .seconds(2))
        #expect(try disk.metadata(forKey: key) != nil)
        #expect(try disk.entry(forKey: key, includingStale: true)?.isStale == false)
        #expect(disk.store.state.withLock { $0.accessCount } == 1, "the live read, not the metadata read")
        try disk.flush()
        let used = try #require(try disk.storedEntry(forKey: key)).accessed
        #expect(used == written + 2_000)

        clock.advance(by: .seconds(10))
        #expect(try disk.entry(forKey: key, includingStale: true)?.isStale == true)
        #expect(try disk.metadata(forKey: key) == nil)
        #expect(disk.store.state.withLock { $0.accessCount } == 0, "a stale read is not a use")
        try disk.flush()
        #expect(try disk.storedEntry(forKey: key)?.accessed == used)
    }

    @Test("the window survives a close and a reopen of the directory")
    func acrossReopen() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let key = Array("k".utf8)
        let start = clock.clock.milliseconds
        do {
            let disk = try Self.open(dir, clock)
            try Self.write(disk, [9, 8, 7], "k", expiresIn: 10_000, staleFor: 20_000)
            disk.close()  // commits the queued write
        }
        clock.advance(by: .seconds(15))
        do {
            let disk = try Self.open(dir, clock)
            #expect(try disk.data(forKey: key) == nil)
            let stale = try #require(try disk.entry(forKey: key, includingStale: true))
            #expect(stale.isStale && stale.value == [9, 8, 7] && stale.staleUntil == start + 30_000)
            #expect(try disk.storedEntry(forKey: key)?.staleUntil == start + 30_000)
            try disk.removeExpired()
            #expect(disk.totalCount == 1)
            disk.close()
        }
        clock.advance(by: .seconds(15))
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        #expect(try disk.entry(forKey: key, includingStale: true) == nil)
        try disk.removeExpired()
        #expect(disk.totalCount == 0)
    }

    @Test("replacing an entry with or without a window leaves exactly its own expiry index entry")
    func replacements() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        let start = disk.nowMilliseconds
        func check(_ index: [UInt64], _ step: String) throws {
            try disk.flush()
            #expect(try Self.expiryIndex(disk) == index, "\(step)")
            let report = try disk.verify()
            #expect(report.isClean, "\(step): \(report.problems)")
            #expect(report.expiryEntries == index.count, "\(step)")
        }
        try Self.write(disk, [1], "k", expiresIn: 10_000, staleFor: 20_000)
        try check([start + 30_000], "windowed")
        try Self.write(disk, [2], "k", expiresIn: 5_000, staleFor: 0)
        try check([start + 5_000], "windowed replaced by expiring")
        try Self.write(disk, [3], "k", expiresIn: 8_000, staleFor: 1_000)
        try check([start + 9_000], "expiring replaced by windowed")
        try Self.write(disk, [4], "k", expiresIn: 0, staleFor: 0)
        try check([], "windowed replaced by never expiring")
        try Self.write(disk, [5], "k", expiresIn: 7_000, staleFor: 3_000)
        try check([start + 10_000], "never expiring replaced by windowed")
        // Both in one batch: the first one's index entry goes with it.
        try disk.store.env.writer.sync {
            try Self.write(disk, [6], "k", expiresIn: 2_000, staleFor: 2_000)
            try Self.write(disk, [7], "k", expiresIn: 3_000, staleFor: 0)
        }
        try check([start + 3_000], "two replacements in one batch")
        try disk.store.env.writer.sync {
            try Self.write(disk, [8], "k", expiresIn: 3_000, staleFor: 0)
            try Self.write(disk, [9], "k", expiresIn: 2_000, staleFor: 4_000)
        }
        try check([start + 6_000], "two replacements in one batch, windowed last")
        try disk.removeData(forKey: "k")
        try check([], "removed")
        #expect(disk.totalCount == 0)

        // An ordinary entry replacing a windowed one goes at its own expiry.
        try Self.write(disk, [1], "k", expiresIn: 10_000, staleFor: 20_000)
        try Self.write(disk, [2], "k", expiresIn: 10_000, staleFor: 0)
        try disk.flush()
        clock.advance(by: .seconds(10))
        #expect(try disk.entry(forKey: Array("k".utf8), includingStale: true) == nil)
        try disk.removeExpired()
        #expect(disk.totalCount == 0)
    }

    @Test("repair rebuilds the expiry index of windowed records by staleUntil")
    func repairRebuildsByStaleUntil() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        let start = disk.nowMilliseconds
        try Self.write(disk, [1], "windowed", expiresIn: 10_000, staleFor: 20_000)
        try Self.write(disk, [2], "expiring", expiresIn: 20_000, staleFor: 0)
        try Self.write(disk, [3], "forever", expiresIn: 0, staleFor: 0)
        try disk.flush()
        let store = disk.store
        try store.env.writer.sync { try store.env.write { txn in try txn.empty(store.db.expiry) } }
        #expect(try !disk.verify().isClean)

        let report = try disk.repair()
        #expect(report.expiryEntries == 2)
        #expect(try Self.expiryIndex(disk) == [start + 20_000, start + 30_000])
        let verified = try disk.verify()
        #expect(verified.isClean, "\(verified.problems)")

        clock.advance(by: .seconds(25))
        try disk.removeExpired()
        #expect(disk.totalCount == 2, "the expiring entry goes, the windowed one stays")
        #expect(try disk.entry(forKey: Array("windowed".utf8), includingStale: true)?.isStale == true)
        clock.advance(by: .seconds(5))
        try disk.removeExpired()
        #expect(disk.totalCount == 1)
        #expect(try disk.data(forKey: "forever") == [3])
    }

    @Test("a stale window must end after a nonzero expiry")
    func invalidWindowsRefused() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        for (expires, staleUntil) in [(UInt64(5_000), UInt64(5_000)), (5_000, 4_999), (0, 5_000)] {
            #expect(throws: CacheError.self, "expires \(expires), staleUntil \(staleUntil)") {
                try disk.prepareWrite([1], forKey: [1], now: 1_000, expires: expires, staleUntil: staleUntil)
            }
        }
        _ = try disk.prepareWrite([1], forKey: [1], now: 1_000, expires: 5_000, staleUntil: 5_001)
        _ = try disk.prepareWrite([1], forKey: [1], now: 1_000, expires: 0, staleUntil: 0)
    }

    @Test("the write queue counts a windowed record's 40-byte header, and the cost limit its whole record")
    func sizes() throws {
        let key = try StorageKey(Array("k".utf8))
        let deferred = DeferredRecord(
            value: [UInt8](repeating: 1, count: 100), created: 1, expires: 2, staleUntil: 3, threshold: 16, level: 1)
        let write = QueuedWrite(sequence: 1, key: key, operation: .setDeflatingLater(deferred))
        #expect(write.byteCount == 40 + 100 + 1)
        #expect(deferred.record(for: key).withUnsafeBytes { Record.Header($0)?.size } == 40)

        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration(costLimit: 40 + 1 + 100)
        configuration.automaticTrimming = false
        configuration.compressionThreshold = nil
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let value = [UInt8](repeating: 1, count: 100)
        _ = try disk.prepareWrite(value, forKey: [1], now: 1, expires: 2, staleUntil: 3)
        #expect(throws: CacheError.valueTooLarge(size: 40 + 1 + 101, limit: 141)) {
            try disk.prepareWrite(value + [1], forKey: [1], now: 1, expires: 2, staleUntil: 3)
        }
        _ = try disk.prepareWrite(value + [1, 2, 3, 4, 5, 6, 7, 8], forKey: [1], now: 1, expires: 2)
    }

    @Test("listing shows the window; statistics count a stale entry as expired")
    func inspection() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        let start = disk.nowMilliseconds
        try Self.write(disk, [1], "windowed", expiresIn: 10_000, staleFor: 20_000)
        try Self.write(disk, [2], "plain", expiresIn: 10_000, staleFor: 0)
        try disk.flush()
        let entries = try disk.storedEntries(after: nil, limit: 10, withValues: false)
        #expect(entries.map(\.staleUntil) == [nil, start + 30_000])
        #expect(entries.map(\.expires) == [start + 10_000, start + 10_000])
        #expect(try disk.storeStatistics().expiredEntries == 0)
        clock.advance(by: .seconds(10))
        #expect(try disk.storeStatistics().expiredEntries == 2)
        try disk.removeExpired()
        #expect(try disk.storeStatistics().expiredEntries == 1)
        #expect(try disk.storeStatistics().payloadBytes == 1)
    }
}

@Suite("Record format 3")
struct StaleWindowRecordTests {
    static func encode(
        _ value: [UInt8], key: [UInt8] = [7], expires: UInt64 = 2_000, staleUntil: UInt64 = 0, threshold: Int? = 512
    ) -> [UInt8] {
        value.withUnsafeBytes {
            Record.encode(
                value: $0, key: try! StorageKey(key), now: 1_000, expires: expires, staleUntil: staleUntil,
                threshold: threshold, level: 1)
        }
    }

    /// `record` with its checksum recomputed after an edit.
    static func resealed(_ record: [UInt8]) -> [UInt8] {
        var record = record
        record.withUnsafeMutableBytes { $0.storeLE(Record.checksum(UnsafeRawBufferPointer($0)), at: 4) }
        return record
    }

    @Test(
        "a record with a window is format 3 with a 40-byte header, and round-trips",
        arguments: [(false, 3), (true, 3), (false, 600), (true, 600)])
    func roundTrip(compressible: Bool, keyLength: Int) throws {
        let value = sampleBytes(count: 2_000, compressible: compressible)
        let key = [UInt8](repeating: 3, count: keyLength)
        let storageKey = try StorageKey(key)
        let record = Self.encode(value, key: key, staleUntil: 5_000)
        try record.withUnsafeBytes { bytes in
            let header = try Record.validate(bytes, storedKey: storageKey.bytes)
            #expect(header.version == Record.staleWindowVersion)
            #expect(header.size == 40)
            #expect(header.flags.contains(.compressed) == compressible)
            #expect(header.flags.contains(.fullKey) == (keyLength > StorageKey.directLimit))
            #expect((header.created, header.expires, header.staleUntil) == (1_000, 2_000, 5_000))
            #expect(header.removalDeadline == 5_000)
            #expect(header.valueLength == value.count)
            #expect(try Record.value(bytes, header: header) == value)
            #expect(Record.matches(bytes, header: header, key: storageKey))
            #expect(Record.fullKey(bytes, header: header) == (keyLength > StorageKey.directLimit ? key : nil))
            if !compressible { #expect(bytes.count == 40 + header.keyLength + value.count) }
            #expect(RecordIdentity(bytes)?.length == bytes.count)

            #expect(try Record.read(bytes, key: storageKey, now: 1_999)?.value == value)
            #expect(try Record.read(bytes, key: storageKey, now: 2_000) == nil)
            let stale = try Record.read(bytes, key: storageKey, now: 4_999, includingStale: true)
            #expect(stale?.value == value && stale?.header.isExpired(at: 4_999) == true)
            #expect(try Record.read(bytes, key: storageKey, now: 5_000, includingStale: true) == nil)
        }
    }

    @Test("a record without a window is still format 2, with a 32-byte header, as before")
    func formatTwoUnchanged() throws {
        let value = sampleBytes(count: 100, compressible: false)
        let record = Self.encode(value)
        #expect(record.count == 32 + value.count)
        #expect(record[0] == 2)
        try record.withUnsafeBytes { bytes in
            let header = try Record.validate(bytes, storedKey: [7])
            #expect(header.size == 32)
            #expect(header.staleUntil == 0)
            #expect(header.removalDeadline == 2_000)
            #expect(try Record.value(bytes, header: header) == value)
            #expect(try Record.read(bytes, key: try StorageKey([7]), now: 2_000, includingStale: true) == nil)
        }
        // A format 2 record whose payload begins with what format 3 would read as a window is
        // still format 2.
        let lookalike = Self.encode([UInt8](repeating: 0xFF, count: 8), threshold: nil)
        try lookalike.withUnsafeBytes { bytes in
            let header = try Record.validate(bytes, storedKey: [7])
            #expect(header.staleUntil == 0 && header.size == 32)
            #expect(try Record.value(bytes, header: header) == [UInt8](repeating: 0xFF, count: 8))
        }
    }

    @Test("a format 1 record, built by hand, is still read", arguments: [false, true])
    func formatOne(compressible: Bool) throws {
        let value = sampleBytes(count: 1_000, compressible: compressible)
        var record = Self.encode(value, key: Array("key-A".utf8))
        record[0] = 1
        record[2] = 0
        record[3] = 0
        record = Self.resealed(record)
        try record.withUnsafeBytes { bytes in
            let header = try Record.validate(bytes, storedKey: Array("key-A".utf8))
            #expect(header.version == 1)
            #expect(header.size == 32)
            #expect(header.staleUntil == 0)
            #expect(header.removalDeadline == 2_000)
            #expect(try Record.value(bytes, header: header) == value)
        }
    }

    @Test("a format 3 header whose window does not end after a nonzero expiry, or cut short, is malformed")
    func malformed() throws {
        let record = Self.encode([1, 2, 3], expires: 2_000, staleUntil: 5_000)
        func damage(_ bytes: [UInt8]) -> Record.Damage? {
            bytes.withUnsafeBytes { bytes in
                do throws(Record.Damage) {
                    _ = try Record.validate(bytes)
                    return nil
                } catch {
                    return error
                }
            }
        }
        #expect(damage(record) == nil)
        func edited(expires: UInt64, staleUntil: UInt64) -> [UInt8] {
            var copy = record
            copy.withUnsafeMutableBytes {
                $0.storeLE(expires, at: 16)
                $0.storeLE(staleUntil, at: 32)
            }
            return Self.resealed(copy)
        }
        #expect(damage(edited(expires: 2_000, staleUntil: 2_000)) == .header, "staleUntil == expires")
        #expect(damage(edited(expires: 2_000, staleUntil: 1_999)) == .header, "staleUntil < expires")
        #expect(damage(edited(expires: 2_000, staleUntil: 0)) == .header, "no window")
        #expect(damage(edited(expires: 0, staleUntil: 5_000)) == .header, "never expires")
        #expect(damage(edited(expires: 2_000, staleUntil: .max)) == nil)
        #expect(damage(Array(record.prefix(39))) == .header, "cut to 39 bytes")
        // A 39-byte format 3 record is too short for its header whatever it holds.
        var short = [UInt8](repeating: 0, count: 39)
        short[0] = 3
        #expect(damage(Self.resealed(short)) == .header)
        short.withUnsafeBytes { #expect(RecordIdentity($0) == nil) }
        var formatTwo = short
        formatTwo[0] = 2
        formatTwo.withUnsafeBytes { #expect(RecordIdentity(UnsafeRawBufferPointer(rebasing: $0[..<32])) != nil) }
        for version: UInt8 in [0, 4] {
            var other = record
            other[0] = version
            #expect(damage(Self.resealed(other)) == .header, "version \(version)")
        }
    }
}
