/// Absolute expiry times, for integrations that keep an entry's expiry across an overwrite
/// (Hummingbird's `PersistDriver.set` with `expires: nil`) or report the time it has left.
extension DiskCache {
    /// Now on the cache's clock, in milliseconds since 1970.
    package var nowMilliseconds: UInt64 { configuration.clock.milliseconds }

    /// The live value under `key` and when it expires (milliseconds since 1970, 0 for never), as
    /// ``data(forKey:)`` finds it (queued writes included).
    package func valueAndExpiry(forKey key: [UInt8]) throws -> (value: [UInt8], expires: UInt64)? {
        try entry(forKey: key).map { ($0.value, $0.expires) }
    }

    /// Stores `value` under `key`, expiring at `expires` milliseconds since 1970 (0 for never).
    package func setData(_ value: [UInt8], forKey key: [UInt8], expiringAt expires: UInt64) throws {
        try write(value, forKey: key, now: nowMilliseconds, expires: expires)
    }
}
