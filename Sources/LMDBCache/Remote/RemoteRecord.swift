/// Values in a remote tier: the disk tier's records (``Record``), so what travels is checksummed,
/// carries the key it was written for, its lifetime and tags, and is compressed where it pays.
/// A record read back is untrusted: anything that does not check out is a miss.
package enum RemoteRecord {
    /// A record read back and checked.
    package struct Decoded: Sendable, Equatable {
        /// The value's bytes, inflated.
        package var value: [UInt8]
        /// Milliseconds since 1970 when it was written, and when it expires (0: never).
        package var created: UInt64
        package var expires: UInt64
        /// The end of its stale window (0: none).
        package var staleUntil: UInt64
        package var tags: EntryTags
    }

    /// The record for `value` under `key`, as the disk tier would write it with `configuration`'s
    /// compression.
    package static func encode(
        _ value: [UInt8], forKey key: [UInt8], now: UInt64, expires: UInt64, staleUntil: UInt64, tags: EntryTags,
        configuration: DiskCache.Configuration
    ) throws -> [UInt8] {
        let storageKey = try StorageKey(key)
        guard Record.isValidStaleWindow(expires: expires, staleUntil: staleUntil) else {
            throw CacheError.codecFailed(operation: "encode", reason: "a stale window must end after a nonzero expiry")
        }
        guard value.count <= Record.maxValueSize else {
            throw CacheError.valueTooLarge(size: value.count, limit: Record.maxValueSize)
        }
        return value.withUnsafeBytes { bytes in
            Record.encode(
                value: bytes, key: storageKey, now: now, expires: expires, staleUntil: staleUntil, tags: tags,
                threshold: configuration.compressionThreshold, level: configuration.compressionLevel)
        }
    }

    /// The record `bytes` found under `key`; nil when it is damaged, of a format this build does
    /// not read, or was written for another key.
    package static func decode(_ bytes: [UInt8], forKey key: [UInt8]) -> Decoded? {
        guard let storageKey = try? StorageKey(key) else { return nil }
        return bytes.withUnsafeBytes { bytes -> Decoded? in
            guard let header = try? Record.validate(bytes, storedKey: storageKey.bytes),
                Record.matches(bytes, header: header, key: storageKey),
                let value = try? Record.value(bytes, header: header)
            else { return nil }
            return Decoded(
                value: value, created: header.created, expires: header.expires, staleUntil: header.staleUntil,
                tags: Record.tags(bytes, header: header))
        }
    }
}
