/// The bytes stored for one entry. Little-endian, 32-byte header:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | format version (``formatVersion``) |
/// | 1 | 1 | flags: 1 = payload is raw deflate, 2 = full key stored |
/// | 2 | 2 | key tag: the low 16 bits of the crc32 of the stored (LMDB) key |
/// | 4 | 4 | crc32 of bytes 0..<4 and 8..<end |
/// | 8 | 8 | created (the last write), ms since 1970 |
/// | 16 | 8 | expires, ms since 1970; 0 = never |
/// | 24 | 4 | value length before compression |
/// | 28 | 4 | full key length (0 unless flag 2) |
/// | 32 | … | the full key (when flag 2), then the payload |
///
/// A record is immutable: reads that move an entry in the access order write 8 bytes to the
/// `lastAccess` database instead, so a read never rewrites a (possibly large) record.
///
/// The key tag ties a record to the key it was written under: the checksum covers the record,
/// not LMDB's copy of the key, so without it a damaged key byte in the data file would serve the
/// record's value for a key that was never written. Format 1 records (bytes 2..<4 zero, no tag)
/// are still read, so a store written by an earlier version keeps its entries; every write
/// replaces them with format 2.
///
/// `package` access: the fuzz targets under `Fuzz/` drive the decoder directly.
package struct Record {
    package static let formatVersion: UInt8 = 2
    /// The oldest format still read: 1, the same layout without the key tag.
    static let oldestReadableVersion: UInt8 = 1
    package static let headerSize = 32
    /// Largest value accepted: one write transaction dirties at most ~512 MB of pages in LMDB.
    package static let maxValueSize = 256 << 20

    package struct Flags: OptionSet, Equatable {
        package let rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }
        static let compressed = Flags(rawValue: 1)
        static let fullKey = Flags(rawValue: 2)
    }

    enum Offset {
        static let version = 0
        static let flags = 1
        static let keyTag = 2
        static let checksum = 4
        static let created = 8
        static let expires = 16
        static let valueLength = 24
        static let keyLength = 28
    }

    /// The header fields of a stored record, checked for shape but not yet for the checksum.
    package struct Header: Equatable {
        package var version: UInt8
        package var flags: Flags
        package var keyTag: UInt16
        package var created: UInt64
        package var expires: UInt64
        package var valueLength: Int
        package var keyLength: Int

        /// Parses the header; nil when `bytes` cannot be a record of this format.
        package init?(_ bytes: UnsafeRawBufferPointer) {
            guard bytes.count >= Record.headerSize else { return nil }
            version = bytes[Offset.version]
            flags = Flags(rawValue: bytes[Offset.flags])
            keyTag = bytes.loadLE(UInt16.self, at: Offset.keyTag)
            created = bytes.loadLE(UInt64.self, at: Offset.created)
            expires = bytes.loadLE(UInt64.self, at: Offset.expires)
            valueLength = Int(bytes.loadLE(UInt32.self, at: Offset.valueLength))
            keyLength = Int(bytes.loadLE(UInt32.self, at: Offset.keyLength))
            guard (Record.oldestReadableVersion...Record.formatVersion).contains(version), flags.rawValue & ~3 == 0,
                flags.contains(.fullKey) == (keyLength > 0),
                Record.headerSize + keyLength <= bytes.count
            else { return nil }
            if !flags.contains(.compressed) && Record.headerSize + keyLength + valueLength != bytes.count {
                return nil
            }
        }

        func isExpired(at now: UInt64) -> Bool { expires != 0 && expires <= now }

        /// False when the key tag says the record was written under another stored key (format 1
        /// records carry no tag and always pass).
        func belongs(toStoredKey storedKey: [UInt8]) -> Bool {
            version < 2 || keyTag == Record.keyTag(storedKey)
        }
    }

    /// Why a stored record could not be read.
    package enum Damage: Error, CustomStringConvertible {
        case header, checksum, decompression, key
        package var description: String {
            switch self {
            case .header: return "malformed header or unknown format version"
            case .checksum: return "checksum mismatch"
            case .decompression: return "payload does not inflate to its recorded length"
            case .key: return "stored under a key it was not written for"
            }
        }
    }

    /// Builds the record `key` stores for `value`, deflating it at `level` when it is at least
    /// `threshold` bytes, does not look incompressible, and shrinks. `threshold` nil turns
    /// compression off.
    package static func encode(
        value: UnsafeRawBufferPointer, key: StorageKey, now: UInt64, expires: UInt64,
        threshold: Int?, level: Int
    ) -> [UInt8] {
        let fullKey = key.fullKey
        let tag = keyTag(key.bytes)
        let keyLength = fullKey?.count ?? 0
        let payloadOffset = headerSize + keyLength
        var flags: Flags = fullKey == nil ? [] : .fullKey
        return [UInt8](unsafeUninitializedCapacity: payloadOffset + value.count) { buffer, count in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            let payloadArea = UnsafeMutableRawBufferPointer(rebasing: raw[payloadOffset...])
            var payloadLength = value.count
            if mayDeflate(value, threshold: threshold),
                let compressed = Deflate.deflate(
                    value, into: UnsafeMutableRawBufferPointer(rebasing: payloadArea[..<(value.count - 1)]),
                    level: level)
            {
                flags.insert(.compressed)
                payloadLength = compressed
            } else if value.count > 0 {
                payloadArea.baseAddress!.copyMemory(from: value.baseAddress!, byteCount: value.count)
            }
            raw[Offset.version] = formatVersion
            raw[Offset.flags] = flags.rawValue
            raw.storeLE(tag, at: Offset.keyTag)
            raw.storeLE(now, at: Offset.created)
            raw.storeLE(expires, at: Offset.expires)
            raw.storeLE(UInt32(value.count), at: Offset.valueLength)
            raw.storeLE(UInt32(keyLength), at: Offset.keyLength)
            if let fullKey {
                fullKey.withUnsafeBytes { key in
                    (raw.baseAddress! + headerSize).copyMemory(from: key.baseAddress!, byteCount: keyLength)
                }
            }
            count = payloadOffset + payloadLength
            raw.storeLE(checksum(UnsafeRawBufferPointer(rebasing: raw[..<count])), at: Offset.checksum)
        }
    }

    /// True when ``encode(value:key:now:expires:threshold:level:)`` tries deflate on `value`: at
    /// least `threshold` bytes (nil: never) and not looking incompressible.
    static func mayDeflate(_ value: UnsafeRawBufferPointer, threshold: Int?) -> Bool {
        guard let threshold else { return false }
        return value.count >= threshold && value.count > 1 && !Deflate.looksIncompressible(value)
    }

    /// The crc32 a record's header should carry: over everything but the checksum itself.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        let head = Deflate.crc32(UnsafeRawBufferPointer(rebasing: bytes[..<Offset.checksum]))
        return Deflate.crc32(UnsafeRawBufferPointer(rebasing: bytes[Offset.created...]), seed: head)
    }

    /// The key tag a record stored under `storedKey` carries.
    package static func keyTag(_ storedKey: [UInt8]) -> UInt16 {
        storedKey.withUnsafeBytes { UInt16(truncatingIfNeeded: Deflate.crc32($0)) }
    }

    /// Checks the whole record (shape and checksum) and returns its header. Says nothing of the
    /// key it is stored under: see ``validate(_:storedKey:)``.
    package static func validate(_ bytes: UnsafeRawBufferPointer) throws(Damage) -> Header {
        guard let header = Header(bytes) else { throw .header }
        guard bytes.loadLE(UInt32.self, at: Offset.checksum) == checksum(bytes) else { throw .checksum }
        return header
    }

    /// Checks the whole record and that it was written under `storedKey` (the LMDB key it was
    /// found under); returns its header.
    package static func validate(_ bytes: UnsafeRawBufferPointer, storedKey: [UInt8]) throws(Damage) -> Header {
        let header = try validate(bytes)
        guard header.belongs(toStoredKey: storedKey) else { throw .key }
        return header
    }

    /// True when the record belongs to `key` (long keys: the stored full key equals it).
    package static func matches(_ bytes: UnsafeRawBufferPointer, header: Header, key: StorageKey) -> Bool {
        guard let fullKey = key.fullKey else { return !header.flags.contains(.fullKey) }
        guard header.keyLength == fullKey.count else { return false }
        return fullKey.withUnsafeBytes { expected in
            UnsafeRawBufferPointer(rebasing: bytes[headerSize..<(headerSize + header.keyLength)])
                .elementsEqual(expected)
        }
    }

    /// The stored full key of a long-key record.
    package static func fullKey(_ bytes: UnsafeRawBufferPointer, header: Header) -> [UInt8]? {
        guard header.flags.contains(.fullKey) else { return nil }
        return Array(bytes[headerSize..<(headerSize + header.keyLength)])
    }

    /// The record `bytes`, stored under `key`, read at `now`: checked whole, then its header and
    /// value; nil when it belongs to another long key with the same stored key, or has expired.
    /// The one read of a record for a lookup, queued or committed.
    static func read(_ bytes: UnsafeRawBufferPointer, key: StorageKey, now: UInt64) throws(Damage) -> (
        header: Header, value: [UInt8]
    )? {
        let header = try validate(bytes, storedKey: key.bytes)
        guard matches(bytes, header: header, key: key), !header.isExpired(at: now) else { return nil }
        return (header, try value(bytes, header: header))
    }

    /// The value, inflated when compressed. `bytes` must have passed ``validate(_:)``.
    package static func value(_ bytes: UnsafeRawBufferPointer, header: Header) throws(Damage) -> [UInt8] {
        let payload = UnsafeRawBufferPointer(rebasing: bytes[(headerSize + header.keyLength)...])
        guard header.flags.contains(.compressed) else { return Array(payload) }
        guard header.valueLength <= maxValueSize else { throw .decompression }
        var ok = false
        let value = [UInt8](unsafeUninitializedCapacity: header.valueLength) { buffer, count in
            ok = Deflate.inflate(payload, into: UnsafeMutableRawBufferPointer(buffer))
            count = ok ? header.valueLength : 0
        }
        guard ok else { throw .decompression }
        return value
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always)
    func loadLE<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

extension UnsafeMutableRawBufferPointer {
    @inline(__always)
    func storeLE<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
    }
}
