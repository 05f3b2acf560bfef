import Testing

@testable import LMDBCache

@Suite("Record format")
struct RecordTests {
    static func encode(_ value: [UInt8], key: [UInt8] = [7]) -> [UInt8] {
        value.withUnsafeBytes {
            Record.encode(value: $0, key: try! StorageKey(key), now: 1_000, expires: 2_000, threshold: 512, level: 1)
        }
    }

    @Test("a record carries version, flags, times and lengths, and decodes to its value")
    func fields() throws {
        let value = sampleBytes(count: 2_000, compressible: true)
        let key = [UInt8](repeating: 3, count: 600)
        let storedKey = try StorageKey(key).bytes
        let record = Self.encode(value, key: key)
        try record.withUnsafeBytes { bytes in
            let header = try Record.validate(bytes, storedKey: storedKey)
            #expect(header.version == Record.formatVersion)
            #expect(header.flags == [.compressed, .fullKey])
            #expect(header.keyTag == Record.keyTag(storedKey))
            #expect(header.created == 1_000)
            #expect(header.expires == 2_000)
            #expect(header.valueLength == 2_000)
            #expect(header.keyLength == 600)
            #expect(try Record.value(bytes, header: header) == value)
            #expect(Record.fullKey(bytes, header: header) == key)
        }
    }

    @Test("flipping any single byte of a record makes it fail validation or decoding", arguments: [false, true])
    func everyFlipIsCaught(compressible: Bool) {
        let value = sampleBytes(count: 700, compressible: compressible)
        let record = Self.encode(value)
        for offset in 0..<record.count {
            var damaged = record
            damaged[offset] ^= 0x5A
            let decoded: [UInt8]? = damaged.withUnsafeBytes { bytes in
                guard let header = try? Record.validate(bytes) else { return nil }
                return try? Record.value(bytes, header: header)
            }
            #expect(decoded == nil, "a flip at offset \(offset) went unnoticed")
        }
    }

    @Test("a record found under another key than the one it was written for is damage, not a value")
    func keyTagTiesRecordToKey() throws {
        let record = Self.encode(sampleBytes(count: 100, compressible: false), key: Array("key-A".utf8))
        record.withUnsafeBytes { bytes in
            #expect(throws: Record.Damage.key) { try Record.validate(bytes, storedKey: Array("key-B".utf8)) }
            #expect((try? Record.validate(bytes, storedKey: Array("key-A".utf8))) != nil)
        }
    }

    @Test("a format 1 record (no key tag), as earlier versions wrote, is still read")
    func formatOneIsRead() throws {
        let value = sampleBytes(count: 1_000, compressible: true)
        var record = Self.encode(value, key: Array("key-A".utf8))
        record[0] = 1
        record[2] = 0
        record[3] = 0
        record.withUnsafeMutableBytes { $0.storeLE(Record.checksum(UnsafeRawBufferPointer($0)), at: 4) }
        try record.withUnsafeBytes { bytes in
            let header = try Record.validate(bytes, storedKey: Array("key-A".utf8))
            #expect(header.version == 1)
            #expect(try Record.value(bytes, header: header) == value)
        }
    }

    @Test("a record of another format version or a truncated record is rejected")
    func versionAndLength() {
        var record = Self.encode([1, 2, 3])
        record.withUnsafeBytes { #expect((try? Record.validate(UnsafeRawBufferPointer(rebasing: $0[..<20]))) == nil) }
        for version in [0, Record.newestReadableVersion + 1] {
            record[0] = version
            record.withUnsafeBytes { #expect(Record.Header($0) == nil, "version \(version)") }
        }
    }
}

@Suite("Write queue")
struct PendingWritesTests {
    static let limits = DiskLimits(count: nil, cost: nil, lowWater: 0.9, clock: .system)

    @Test("buffered access times stop growing at their limit and leave in bounded batches")
    func accessesAreBounded() throws {
        var pending = PendingWrites()
        for index in 0..<100 {
            pending.recordAccess(try StorageKey(Array("k\(index)".utf8)), at: 5, created: 1, limit: 50)
        }
        #expect(pending.accessCount == 50)
        let taken = pending.takeBatch(maxWrites: 10, maxBytes: 1 << 20, maxAccesses: 20)
        let first = try #require(taken)
        #expect(first.accesses.count == 20)
        #expect(pending.accessCount == 30)
    }

    @Test("the newest write for a key is what a read sees until its batch completes")
    func newestWriteWins() throws {
        var pending = PendingWrites()
        let key = try StorageKey([1])
        _ = pending.enqueue(key, .set(record: [1]), limits: Self.limits)
        _ = pending.enqueue(key, .remove, limits: Self.limits)
        guard case .remove = pending.pending(key) else {
            Issue.record("the removal should hide the earlier set")
            return
        }
        let taken = pending.takeBatch(maxWrites: 1, maxBytes: 1 << 20, maxAccesses: 0)
        let batch = try #require(taken)
        pending.complete(batch, error: nil)
        #expect(pending.pending(key) != nil, "the removal is still queued")
        let remaining = pending.takeBatch(maxWrites: 10, maxBytes: 1 << 20, maxAccesses: 0)
        let rest = try #require(remaining)
        pending.complete(rest, error: nil)
        #expect(pending.pending(key) == nil)
        #expect(pending.committedThrough == 2)
    }

    @Test("a synchronous write whose batch failed learns so, however many batches failed after it")
    func synchronousFailureKept() throws {
        var pending = PendingWrites()
        let first = pending.enqueue(try StorageKey([1]), .remove, limits: Self.limits)
        pending.requestSync(through: first)
        let batch = pending.takeBatch(maxWrites: 1, maxBytes: 1 << 20, maxAccesses: 10)!
        pending.complete(batch, error: .diskFull(path: "/x"))
        for index in 0..<100 {
            _ = pending.enqueue(try StorageKey([2, UInt8(index)]), .remove, limits: Self.limits)
            let later = pending.takeBatch(maxWrites: 1, maxBytes: 1 << 20, maxAccesses: 10)!
            pending.complete(later, error: .diskFull(path: "/x"))
        }
        #expect(pending.takeSynchronousResult(first) == .diskFull(path: "/x"))
        #expect(pending.takeSynchronousResult(first) == nil, "taken once")
    }

    @Test("a drain's target is what was queued when it began: access times and writes queued later are not in it")
    func drainTargetIgnoresLaterArrivals() throws {
        var pending = PendingWrites()
        for index in 0..<30 {
            pending.recordAccess(try StorageKey(Array("k\(index)".utf8)), at: 5, created: 1, limit: 1_000)
        }
        let written = try StorageKey([1])
        _ = pending.enqueue(written, .set(record: [1]), limits: Self.limits)
        // A read of a key with a queued write: its access time waits for that write.
        pending.recordAccess(written, at: 5, created: 1, limit: 1_000)
        var target = pending.drainTarget
        #expect(!pending.hasTaken(&target))
        let first = pending.takeBatch(maxWrites: 10, maxBytes: 1 << 20, maxAccesses: 20)!
        pending.complete(first, error: nil)
        #expect(!pending.hasTaken(&target), "10 of the access times queued before are still queued")
        // Reads and writes keep arriving: the target does not move with them.
        for index in 0..<50 {
            pending.recordAccess(try StorageKey(Array("later\(index)".utf8)), at: 6, created: 1, limit: 1_000)
        }
        _ = pending.enqueue(try StorageKey([2]), .remove, limits: Self.limits)
        let second = pending.takeBatch(maxWrites: 10, maxBytes: 1 << 20, maxAccesses: 20)!
        pending.complete(second, error: nil)
        #expect(second.accesses.contains { $0.key == written }, "the access time that waited for the write")
        #expect(pending.hasTaken(&target))
        let ended = pending.endDrainIfIdle()
        #expect(!ended, "what arrived later is still queued")
        while let rest = pending.takeBatch(maxWrites: 10, maxBytes: 1 << 20, maxAccesses: 20) {
            pending.complete(rest, error: nil)
        }
        var now = pending.drainTarget
        #expect(pending.hasTaken(&now))
    }

    @Test("a batch that completes a requested sync says so; one that does not, or a sync already done, does not")
    func batchCompletingSyncRequest() throws {
        var pending = PendingWrites()
        let first = pending.enqueue(try StorageKey([1]), .remove, limits: Self.limits)
        let second = pending.enqueue(try StorageKey([2]), .remove, limits: Self.limits)
        pending.requestSync(through: second)
        let partial = pending.takeBatch(maxWrites: 1, maxBytes: 1 << 20, maxAccesses: 0)!
        #expect(partial.writes.map(\.sequence) == [first])
        #expect(!partial.completesSyncRequest, "the synchronous write is in the next batch")
        pending.complete(partial, error: nil)
        let rest = pending.takeBatch(maxWrites: 10, maxBytes: 1 << 20, maxAccesses: 0)!
        #expect(rest.completesSyncRequest)
        pending.complete(rest, error: nil)
        pending.markSynced()
        _ = pending.enqueue(try StorageKey([3]), .remove, limits: Self.limits)
        let later = pending.takeBatch(maxWrites: 10, maxBytes: 1 << 20, maxAccesses: 0)!
        #expect(!later.completesSyncRequest, "no sync was asked for")
    }

    @Test("a synchronous write whose sync failed after its commit learns so, and so does the next flush")
    func synchronousSyncFailureKept() throws {
        var pending = PendingWrites()
        let write = pending.enqueue(try StorageKey([1]), .remove, limits: Self.limits)
        pending.requestSync(through: write)
        let batch = pending.takeBatch(maxWrites: 10, maxBytes: 1 << 20, maxAccesses: 10)!
        pending.complete(batch, error: nil)
        #expect(pending.syncDue)
        pending.markSynced(failure: .lmdb(code: 5, operation: "mdb_env_sync", message: "I/O error"))
        #expect(pending.takeSynchronousResult(write) == .lmdb(code: 5, operation: "mdb_env_sync", message: "I/O error"))
        #expect(pending.takeUnreportedFailure() == .lmdb(code: 5, operation: "mdb_env_sync", message: "I/O error"))
    }
}
