import Foundation

/// When a cached value was stored and when it stops being served (``Cache/metadata(forKey:)``).
public struct CacheEntryMetadata: Sendable, Hashable {
    /// When the value was stored (inserted, or loaded), to the millisecond.
    public var storedAt: Date
    /// When the value expires; nil: never.
    public var expiresAt: Date?
}

extension Cache {
    /// The live values for `keys` that either tier holds (each looked up as by
    /// ``value(forKey:)``); keys with none are absent from the result. Never loads.
    public func values(forKeys keys: some Sequence<Key>) -> [Key: Value] {
        var values: [Key: Value] = [:]
        var seen = Set<Key>()
        for key in keys where seen.insert(key).inserted {
            if let value = value(forKey: key) { values[key] = value }
        }
        return values
    }

    /// When the live value for `key` was stored and when it expires; nil when neither tier holds
    /// one. Not an access: it counts no hit or miss and moves nothing in either tier's order.
    public func metadata(forKey key: Key) -> CacheEntryMetadata? {
        let found: (stored: UInt64, expires: UInt64)?
        if let inMemory = memory.metadata(forKey: key) {
            found = inMemory
        } else if let disk, !isClosedForLoading {
            found = (try? disk.metadata(forKey: key.cacheKeyBytes)).flatMap { $0 }.map { ($0.created, $0.expires) }
        } else {
            found = nil
        }
        return found.map { found in
            CacheEntryMetadata(
                storedAt: Date(milliseconds: found.stored),
                expiresAt: found.expires == 0 ? nil : Date(milliseconds: found.expires))
        }
    }
}

extension Date {
    /// The date `milliseconds` after 1970.
    init(milliseconds: UInt64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1_000)
    }
}
