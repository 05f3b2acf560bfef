import Foundation
import Glibc
import Logging

// The disk tier's values: reads (checksummed, inflated, expired entries dropped), writes through
// the write-behind queue or synchronously, and removals by key, by tag and of everything.

extension DiskCache {
    /// Stores `value` under `key`, replacing any value there.
    ///
    /// Returns once the write is queued (``Durability/batched``) or committed and synced
    /// (``Durability/synchronous``). A later ``data(forKey:)-([UInt8])`` returns `value` either way.
    ///
    /// - Parameters:
    ///   - value: the bytes to store.
    ///   - key: the key to store them under; not empty.
    ///   - expiresAfter: the entry is never returned after this long, read or not. Zero or
    ///     negative: already expired, so never returned (it still replaces any value there). Any
    ///     length works; one reaching past `UInt64.max` milliseconds never expires.
    /// - Throws: ``CacheError/invalidKey(reason:)`` for an empty key,
    ///   ``CacheError/valueTooLarge(size:limit:)`` when the record exceeds the cost limit or
    ///   256 MiB, ``CacheError/closed``, and in synchronous mode any write failure.
    public func setData(_ value: [UInt8], forKey key: [UInt8], expiresAfter: Duration? = nil) throws {
        let now = configuration.clock.milliseconds
        try write(
            value, forKey: key, now: now, expires: expiresAfter.map { now.addingSaturating($0.milliseconds) } ?? 0)
    }

    /// ``setData(_:forKey:expiresAfter:)-(_,[UInt8],_)`` with tags: ``removeAll(taggedWith:)`` removes the entry
    /// with every other entry carrying one of them. Replacing the entry replaces its tags.
    ///
    /// - Throws: ``CacheError/invalidTag(reason:)`` (an empty tag, one past 255 UTF-8 bytes, more
    ///   than 32 tags; nothing is written), and what ``setData(_:forKey:expiresAfter:)-(_,[UInt8],_)`` throws.
    public func setData(
        _ value: [UInt8], forKey key: [UInt8], expiresAfter: Duration? = nil, tags: Set<String>
    ) throws {
        let tags = try EntryTags(tags)
        let now = configuration.clock.milliseconds
        try enqueue(
            try prepareWrite(
                value, forKey: key, now: now,
                expires: expiresAfter.map { now.addingSaturating($0.milliseconds) } ?? 0, tags: tags))
    }

    /// The stored keys of the committed entries carrying `tag` (call ``flush()`` first to see
    /// queued writes), for `cache-dump list --tag`. An invalid tag carries no entry.
    func storedKeys(taggedWith tag: String) throws -> [[UInt8]] {
        guard let bytes = try? EntryTags.storedBytes(of: tag) else { return [] }
        return try withStore { try $0.keys(taggedWith: bytes) }
    }

    /// Encodes and queues the record for `value`, written at `now` and expiring at `expires`
    /// (milliseconds since 1970, 0 for never).
    func write(_ value: [UInt8], forKey key: [UInt8], now: UInt64, expires: UInt64) throws {
        try enqueue(try prepareWrite(value, forKey: key, now: now, expires: expires))
    }

    /// The largest value left to the writer to deflate: 64 KiB deflate in well under a
    /// millisecond; a larger value would hold up every commit, flush and trim behind it.
    static let maxDeferredDeflate = 64 << 10

    /// A record encoded (and compressed) for a key, or a value the writer will encode, ready to
    /// queue.
    struct PreparedWrite: Sendable {
        fileprivate let key: StorageKey
        fileprivate let operation: PendingOperation
    }

    /// Encodes the record for `value` without touching the store: the costly half of a write,
    /// which the two-tier cache does before it takes the key's lock.
    ///
    /// A value deflate may shrink, of at most ``maxDeferredDeflate`` bytes, is left to the writer
    /// thread to deflate when the write is batched, its undeflated record fits the cost limit (so
    /// the limit is checked exactly here) and the queue is less than half full; otherwise, and in
    /// synchronous mode, it is deflated here. Deflating 4 KB of JSON takes tens of microseconds;
    /// queued as it is, the caller returns in a few.
    ///
    /// With a nonzero `staleUntil` the entry has a stale window: past `expires` no plain read
    /// returns it, but it is kept until `staleUntil` for ``entry(forKey:includingStale:)``, and
    /// trimming removes it only then. Its record is format 3 (``Record``), 8 bytes longer.
    ///
    /// - Parameters:
    ///   - now: the write time, milliseconds since 1970.
    ///   - expires: when it stops being served, milliseconds since 1970; 0 for never.
    ///   - staleUntil: when its stale window ends, milliseconds since 1970; 0 for no window. When
    ///     nonzero, `expires` must be nonzero and before it.
    /// - Throws: ``CacheError/invalidKey(reason:)``, ``CacheError/valueTooLarge(size:limit:)``;
    ///   ``CacheError/lmdb(code:operation:message:)`` with `EINVAL` for a stale window that does
    ///   not end after a nonzero `expires`.
    func prepareWrite(
        _ value: [UInt8], forKey key: [UInt8], now: UInt64, expires: UInt64, staleUntil: UInt64 = 0,
        tags: EntryTags = .none
    ) throws -> PreparedWrite {
        let storageKey = try StorageKey(key)
        guard Record.isValidStaleWindow(expires: expires, staleUntil: staleUntil) else {
            throw CacheError.lmdb(
                code: EINVAL, operation: "prepareWrite",
                message: "a stale window (until \(staleUntil)) must end after a nonzero expiry (\(expires))")
        }
        guard value.count <= Record.maxValueSize else {
            throw CacheError.valueTooLarge(size: value.count, limit: Record.maxValueSize)
        }
        let headerSize = Record.headerSize(version: Record.version(staleUntil: staleUntil)) + Record.tagsLength(tags)
        if configuration.durability != .synchronous, value.count <= Self.maxDeferredDeflate,
            value.withUnsafeBytes({ Record.mayDeflate($0, threshold: configuration.compressionThreshold) }),
            configuration.costLimit.map({
                Totals.cost(
                    keyLength: storageKey.bytes.count,
                    recordLength: headerSize + (storageKey.fullKey?.count ?? 0) + value.count) <= $0
            }) ?? true,
            (try? withStore({ $0.queuedBytes < configuration.maxPendingBytes / 2 })) == true
        {
            let deferred = DeferredRecord(
                value: value, created: now, expires: expires, staleUntil: staleUntil, tags: tags,
                threshold: configuration.compressionThreshold, level: configuration.compressionLevel)
            return PreparedWrite(key: storageKey, operation: .setDeflatingLater(deferred))
        }
        let record = value.withUnsafeBytes { bytes in
            Record.encode(
                value: bytes, key: storageKey, now: now, expires: expires, staleUntil: staleUntil, tags: tags,
                threshold: configuration.compressionThreshold,
                level: configuration.compressionLevel)
        }
        let cost = Totals.cost(keyLength: storageKey.bytes.count, recordLength: record.count)
        if let limit = configuration.costLimit, cost > limit {
            throw CacheError.valueTooLarge(size: cost, limit: limit)
        }
        return PreparedWrite(key: storageKey, operation: .set(record: record))
    }

    /// Queues a prepared write (in synchronous mode, returns once it is committed and synced),
    /// logged as `origin`'s (``CacheChange/origin``).
    func enqueue(_ write: PreparedWrite, origin: UInt64? = nil) throws {
        try withStore { store in
            try store.enqueue(
                write.key, write.operation, origin: origin ?? self.origin, limits: limits,
                synchronous: configuration.durability == .synchronous,
                maxPendingBytes: configuration.maxPendingBytes)
        }
    }

    /// The value stored under `key`, or nil when there is none, it expired, or its record is
    /// damaged (a damaged record is also logged and removed).
    public func data(forKey key: [UInt8]) throws -> [UInt8]? {
        try entry(forKey: key)?.value
    }

    /// The value stored under `key` with its expiry in milliseconds since 1970 (0 for none) and
    /// the identity of its record, as ``data(forKey:)`` finds it; the two-tier cache promotes
    /// entries with their expiry, and removes one it cannot decode by its identity.
    func entry(forKey key: [UInt8]) throws -> (value: [UInt8], expires: UInt64, record: RecordIdentity?)? {
        try entry(forKey: key, includingStale: false).map { ($0.value, $0.expires, $0.record) }
    }

    /// What ``DiskCache/entry(forKey:includingStale:)`` finds.
    struct DiskEntry: Sendable {
        var value: [UInt8]
        /// Milliseconds since 1970 of the write.
        var created: UInt64
        /// Milliseconds since 1970 after which plain reads no longer return it; 0 for never.
        var expires: UInt64
        /// Milliseconds since 1970 when its stale window ends; 0 for none.
        var staleUntil: UInt64
        /// The identity of its record; nil for a queued value whose record the writer builds.
        var record: RecordIdentity?
        /// Its tags.
        var tags: EntryTags = .none
        /// True when past `expires` but within its stale window: found only because the read asked
        /// for stale entries.
        var isStale: Bool
    }

    /// The entry stored under `key`, queued or committed, or nil when there is none, it expired,
    /// or its record is damaged (a damaged record is also logged and removed).
    ///
    /// Without `includingStale`, this is ``data(forKey:)``'s read, and a hit counts as an access.
    /// With it, an entry past its expiry but within its stale window (see
    /// ``prepareWrite(_:forKey:now:expires:staleUntil:)``) is returned too, with
    /// ``DiskEntry/isStale`` set. A stale entry is not recorded as an access (a live one is).
    func entry(forKey key: [UInt8], includingStale: Bool) throws -> DiskEntry? {
        try withStore { store -> DiskEntry? in
            let storageKey = try StorageKey(key)
            let now = configuration.clock.milliseconds
            switch try store.lookUp(storageKey, now: now, includingStale: includingStale) {
            case .miss:
                return nil
            case .hit(let value, let created, let expires, let staleUntil, let tags, let record):
                let isStale = expires != 0 && expires <= now
                if !isStale {
                    store.noteRead(
                        storageKey, created: created, now: now,
                        granularity: configuration.accessTimeGranularity.milliseconds,
                        ageLimit: configuration.ageLimit?.milliseconds)
                }
                return DiskEntry(
                    value: value, created: created, expires: expires, staleUntil: staleUntil, record: record,
                    tags: tags, isStale: isStale)
            case .damaged(let damage):
                store.reportDamage(storageKey, damage)
                return nil
            }
        }
    }

    /// The write time and expiry (milliseconds since 1970; 0 for never) of the live entry under
    /// `key`, queued or committed; nil when there is none, it expired (stale entries included), or
    /// its record is damaged (then also logged and removed). Checks the record but decodes no
    /// value, and does not count as an access.
    func metadata(forKey key: [UInt8]) throws -> (created: UInt64, expires: UInt64)? {
        try withStore { store in
            try store.metadata(try StorageKey(key), now: configuration.clock.milliseconds)
        }
    }

    /// True when a value that has not expired is stored under `key`. Does not count as an access.
    public func containsData(forKey key: [UInt8]) throws -> Bool {
        try withStore { store in
            try store.contains(try StorageKey(key), now: configuration.clock.milliseconds)
        }
    }

    /// Removes the value stored under `key`, if any.
    public func removeData(forKey key: [UInt8]) throws {
        try removeData(forKey: key, origin: origin)
    }

    /// ``removeData(forKey:)`` logged as `origin`'s (``CacheChange/origin``).
    func removeData(forKey key: [UInt8], origin: UInt64) throws {
        try withStore { store in
            try store.enqueue(
                try StorageKey(key), .remove, origin: origin, limits: limits,
                synchronous: configuration.durability == .synchronous, maxPendingBytes: configuration.maxPendingBytes)
        }
    }

    /// Removes the value stored under `key` if its record is still `record` when the writer gets
    /// to it: a reader's removal of a value it could not use, which must never remove a write
    /// that replaced that value after the read. Does not wait for the commit.
    func removeData(forKey key: [UInt8], ifUnchanged record: RecordIdentity) throws {
        try withStore { store in store.removeIfUnchanged(try StorageKey(key), record) }
    }

    /// Removes every entry (queued writes included) and commits.
    public func removeAll() throws {
        try removeAll(origin: origin)
    }

    /// ``removeAll()`` logged as `origin`'s (``CacheChange/origin``).
    func removeAll(origin: UInt64) throws {
        try withStore { try $0.removeAll(origin: origin) }
    }

    /// Removes every entry carrying `tag` (queued writes committed first), in transactions of at
    /// most 1,024 removals with the totals exact in each; returns how many it removed (expired
    /// entries not yet trimmed among them). Other
    /// processes' memory tiers drop the tag's entries when they see the change log
    /// (``Cache/Configuration/coherence``).
    ///
    /// - Complexity: O(k log n) for k entries carrying the tag.
    /// - Throws: ``CacheError/invalidTag(reason:)`` for an empty tag or one past 255 UTF-8 bytes,
    ///   ``CacheError/closed``, or the store's failure (entries removed before it stay removed).
    @discardableResult
    public func removeAll(taggedWith tag: String) throws -> Int {
        try removeAll(taggedWith: tag, origin: origin)
    }

    /// ``removeAll(taggedWith:)`` logged as `origin`'s.
    func removeAll(taggedWith tag: String, origin: UInt64) throws -> Int {
        try removeAll(taggedWithStoredBytes: try EntryTags.storedBytes(of: tag), origin: origin)
    }

    /// ``removeAll(taggedWith:)`` of the tag stored as `bytes` (a change received from elsewhere).
    func removeAll(taggedWithStoredBytes bytes: [UInt8], origin: UInt64) throws -> Int {
        guard !bytes.isEmpty, bytes.count <= EntryTags.maxLength else { return 0 }
        return try withStore { try $0.removeAll(taggedWith: bytes, origin: origin) }
    }
}
