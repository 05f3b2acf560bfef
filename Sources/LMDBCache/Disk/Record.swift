/// The bytes stored for one entry. Little-endian, 32-byte header (40 bytes in format 3):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | format version: 2 (``formatVersion``), or 3 (``staleWindowVersion``) |
/// | 1 | 1 | flags: 1 = payload is raw deflate, 2 = full key stored, 4 = tags stored |
/// | 2 | 2 | key tag: the low 16 bits of the crc32 of the stored (LMDB) key |
/// | 4 | 4 | crc32 of bytes 0..<4 and 8..<end |
/// | 8 | 8 | created (the last write), ms since 1970 |
/// | 16 | 8 | expires, ms since 1970; 0 = never |
/// | 24 | 4 | value length before compression |
/// | 28 | 4 | full key length (0 unless flag 2) |
/// | 32 | 8 | format 3 only: stale until, ms since 1970; after a nonzero `expires` |
/// | 32 or 40 | … | the full key (when flag 2), then the tags (when flag 4), then the payload |
///
/// The tags (``EntryTags``): one byte of count (1 to ``EntryTags/maxCount``), then per tag one
/// byte of length (1 to 255) and its bytes, sorted. The checksum covers them. Builds before tags
/// see flag 4 as damage (a miss, then removed), as they see format 3.
///
/// A record is immutable: reads that move an entry in the access order write 8 bytes to the
/// `lastAccess` database instead, so a read never rewrites a (possibly large) record.
///
/// The key tag ties a record to the key it was written under: the checksum covers the record,
/// not LMDB's copy of the key, so without it a damaged key byte in the data file would serve the
/// record's value for a key that was never written. Format 1 records (bytes 2..<4 zero, no tag)
/// are still read, so a store written by an earlier version keeps its entries; every write
/// replaces them with format 2 or 3.
///
/// Format 3 is format 2 with a stale window: past `expires` the entry is not served, but kept
/// until `staleUntil` for a read that asks for stale entries (``Header/staleUntil``). Only a
/// record with a window is written in format 3, so builds that read formats 1 and 2 alone keep
/// reading every other record; to them a format 3 record is damaged (a miss, then removed).
///
/// `package` access: the fuzz targets under `Fuzz/` drive the decoder directly.
package struct Record {
    /// The format of records without a stale window, and the one the store declares (formats 1
    /// and 2 are what builds before format 3 read, so the store goes on declaring 2).
    package static let formatVersion: UInt8 = 2
    /// The format of records with a stale window: format 2's header and 8 bytes of `staleUntil`.
    package static let staleWindowVersion: UInt8 = 3
    /// The oldest format still read: 1, the same layout without the key tag.
    static let oldestReadableVersion: UInt8 = 1
    /// The newest format read.
    static let newestReadableVersion: UInt8 = 3
    /// The header size of formats 1 and 2, which every record without a stale window is written
    /// in, and the least any record's header takes. A record's own is ``Header/size``.
    package static let headerSize = 32
    /// The header size of format 3.
    package static let staleWindowHeaderSize = 40
    /// Largest value accepted: one write transaction dirties at most ~512 MB of pages in LMDB.
    package static let maxValueSize = 256 << 20

    package struct Flags: OptionSet, Equatable {
        package let rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }
        static let compressed = Flags(rawValue: 1)
        static let fullKey = Flags(rawValue: 2)
        static let tagged = Flags(rawValue: 4)
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
        static let staleUntil = 32
    }

    /// The length of a well-formed tags section at `offset` of `bytes`; nil when it runs past the
    /// end or breaks the limits (no tag, more than ``EntryTags/maxCount``, an empty one).
    static func tagsLength(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int? {
        guard offset < bytes.count else { return nil }
        let count = Int(bytes[offset])
        guard count >= 1, count <= EntryTags.maxCount else { return nil }
        var position = offset + 1
        for _ in 0..<count {
            guard position < bytes.count else { return nil }
            let length = Int(bytes[position])
            guard length >= 1, position + 1 + length <= bytes.count else { return nil }
            position += 1 + length
        }
        return position - offset
    }

    /// The tags of a record that passed ``validate(_:)`` (none without flag 4).
    package static func tags(_ bytes: UnsafeRawBufferPointer, header: Header) -> EntryTags {
        guard header.tagsLength > 0 else { return .none }
        var position = header.size + header.keyLength
        let count = Int(bytes[position])
        position += 1
        var tags: [[UInt8]] = []
        tags.reserveCapacity(count)
        for _ in 0..<count {
            let length = Int(bytes[position])
            tags.append(Array(bytes[(position + 1)..<(position + 1 + length)]))
            position += 1 + length
        }
        return EntryTags(checked: tags)
    }

    /// True when the record carries the tag stored as `tag` (``EntryTags/storedBytes(of:)``),
    /// read in place.
    package static func carries(_ bytes: UnsafeRawBufferPointer, header: Header, tag: [UInt8]) -> Bool {
        guard header.tagsLength > 0 else { return false }
        var position = header.size + header.keyLength
        let count = Int(bytes[position])
        position += 1
        for _ in 0..<count {
            let length = Int(bytes[position])
            let stored = UnsafeRawBufferPointer(rebasing: bytes[(position + 1)..<(position + 1 + length)])
            if stored.elementsEqual(tag) { return true }
            position += 1 + length
        }
        return false
    }

    /// Bytes the tags section of `tags` takes (0 for none).
    static func tagsLength(_ tags: EntryTags) -> Int {
        tags.isEmpty ? 0 : tags.bytes.reduce(1) { $0 + 1 + $1.count }
    }

    /// The header size of a record of format `version`: 40 for format 3, else 32 (unknown formats
    /// included, which no header of that size parses as).
    package static func headerSize(version: UInt8) -> Int {
        version == staleWindowVersion ? staleWindowHeaderSize : headerSize
    }

    /// The format a record is written in: 3 with a stale window (`staleUntil` nonzero), else 2.
    package static func version(staleUntil: UInt64) -> UInt8 {
        staleUntil == 0 ? formatVersion : staleWindowVersion
    }

    /// The header fields of a stored record, checked for shape but not yet for the checksum.
    package struct Header: Equatable {
        package var version: UInt8
        package var flags: Flags
        package var keyTag: UInt16
        package var created: UInt64
        package var expires: UInt64
        /// Milliseconds since 1970 until which the entry is kept past `expires` for reads that ask
        /// for stale entries; 0 for none (formats 1 and 2 carry none). When nonzero, `expires` is
        /// nonzero and before it.
        package var staleUntil: UInt64
        package var valueLength: Int
        package var keyLength: Int
        /// Bytes of the tags section (0 without flag 4).
        package var tagsLength: Int

        /// Parses the header; nil when `bytes` cannot be a record of a format this build reads.
        package init?(_ bytes: UnsafeRawBufferPointer) {
            guard bytes.count >= Record.headerSize else { return nil }
            version = bytes[Offset.version]
            guard (Record.oldestReadableVersion...Record.newestReadableVersion).contains(version) else { return nil }
            let size = Record.headerSize(version: version)
            guard bytes.count >= size else { return nil }
            flags = Flags(rawValue: bytes[Offset.flags])
            keyTag = bytes.loadLE(UInt16.self, at: Offset.keyTag)
            created = bytes.loadLE(UInt64.self, at: Offset.created)
            expires = bytes.loadLE(UInt64.self, at: Offset.expires)
            staleUntil = version == Record.staleWindowVersion ? bytes.loadLE(UInt64.self, at: Offset.staleUntil) : 0
            // Both lengths are 32-bit: their sums below cannot overflow a 64-bit Int.
            valueLength = Int(bytes.loadLE(UInt32.self, at: Offset.valueLength))
            keyLength = Int(bytes.loadLE(UInt32.self, at: Offset.keyLength))
            guard flags.rawValue & ~7 == 0, flags.contains(.fullKey) == (keyLength > 0), size + keyLength <= bytes.count
            else { return nil }
            if version == Record.staleWindowVersion && (expires == 0 || staleUntil <= expires) { return nil }
            tagsLength = 0
            if flags.contains(.tagged) {
                guard let length = Record.tagsLength(bytes, at: size + keyLength) else { return nil }
                tagsLength = length
            }
            if !flags.contains(.compressed) && size + keyLength + tagsLength + valueLength != bytes.count {
                return nil
            }
        }

        /// Where the payload begins: after the header, the full key and the tags.
        package var payloadOffset: Int { size + keyLength + tagsLength }

        /// Bytes of this header: where the full key, else the payload, begins.
        package var size: Int { Record.headerSize(version: version) }

        /// When trimming removes the record: the end of its stale window, else its expiry (0 for
        /// never). The expiry index keys the record by it.
        package var removalDeadline: UInt64 { staleUntil != 0 ? staleUntil : expires }

        /// True when past `expires`: never returned by a plain read.
        func isExpired(at now: UInt64) -> Bool { expires != 0 && expires <= now }

        /// True when past ``removalDeadline``: returned by no read, not even one that asks for
        /// stale entries.
        func isPastRemovalDeadline(at now: UInt64) -> Bool {
            removalDeadline != 0 && removalDeadline <= now
        }

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

    /// True when `staleUntil` is a stale window a record expiring at `expires` can carry: 0 (none),
    /// or after a nonzero `expires`.
    package static func isValidStaleWindow(expires: UInt64, staleUntil: UInt64) -> Bool {
        staleUntil == 0 || (expires != 0 && staleUntil > expires)
    }

    /// Builds the record `key` stores for `value`, deflating it at `level` when it is at least
    /// `threshold` bytes, does not look incompressible, and shrinks. `threshold` nil turns
    /// compression off. With a nonzero `staleUntil` (which must pass
    /// ``isValidStaleWindow(expires:staleUntil:)``) the record is format 3, else format 2.
    package static func encode(
        value: UnsafeRawBufferPointer, key: StorageKey, now: UInt64, expires: UInt64, staleUntil: UInt64 = 0,
        tags: EntryTags = .none, threshold: Int?, level: Int
    ) -> [UInt8] {
        precondition(isValidStaleWindow(expires: expires, staleUntil: staleUntil), "a stale window ends after expires")
        let version = version(staleUntil: staleUntil)
        let size = headerSize(version: version)
        let fullKey = key.fullKey
        let tag = keyTag(key.bytes)
        let keyLength = fullKey?.count ?? 0
        let tagsLength = tagsLength(tags)
        let payloadOffset = size + keyLength + tagsLength
        var flags: Flags = fullKey == nil ? [] : .fullKey
        if tagsLength > 0 { flags.insert(.tagged) }
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
            raw[Offset.version] = version
            raw[Offset.flags] = flags.rawValue
            raw.storeLE(tag, at: Offset.keyTag)
            raw.storeLE(now, at: Offset.created)
            raw.storeLE(expires, at: Offset.expires)
            raw.storeLE(UInt32(value.count), at: Offset.valueLength)
            raw.storeLE(UInt32(keyLength), at: Offset.keyLength)
            if version == staleWindowVersion { raw.storeLE(staleUntil, at: Offset.staleUntil) }
            if let fullKey {
                fullKey.withUnsafeBytes { key in
                    (raw.baseAddress! + size).copyMemory(from: key.baseAddress!, byteCount: keyLength)
                }
            }
            if tagsLength > 0 {
                var position = size + keyLength
                raw[position] = UInt8(tags.bytes.count)
                position += 1
                for tag in tags.bytes {
                    raw[position] = UInt8(tag.count)
                    for byte in tag {
                        position += 1
                        raw[position] = byte
                    }
                    position += 1
                }
            }
            count = payloadOffset + payloadLength
            raw.storeLE(checksum(UnsafeRawBufferPointer(rebasing: raw[..<count])), at: Offset.checksum)
        }
    }

    /// True when ``encode(value:key:now:expires:staleUntil:threshold:level:)`` tries deflate on
    /// `value`: at least `threshold` bytes (nil: never) and not looking incompressible.
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
            UnsafeRawBufferPointer(rebasing: bytes[header.size..<(header.size + header.keyLength)])
                .elementsEqual(expected)
        }
    }

    /// The stored full key of a long-key record.
    package static func fullKey(_ bytes: UnsafeRawBufferPointer, header: Header) -> [UInt8]? {
        guard header.flags.contains(.fullKey) else { return nil }
        return Array(bytes[header.size..<(header.size + header.keyLength)])
    }

    /// The record `bytes`, stored under `key`, read at `now`: checked whole, then its header and
    /// value; nil when it belongs to another long key with the same stored key, or has expired
    /// (with `includingStale`, when it is past its stale window, or expired without one).
    /// The one read of a record for a lookup, queued or committed.
    static func read(
        _ bytes: UnsafeRawBufferPointer, key: StorageKey, now: UInt64, includingStale: Bool = false
    ) throws(Damage) -> (header: Header, value: [UInt8])? {
        let header = try validate(bytes, storedKey: key.bytes)
        guard matches(bytes, header: header, key: key),
            !(includingStale ? header.isPastRemovalDeadline(at: now) : header.isExpired(at: now))
        else { return nil }
        return (header, try value(bytes, header: header))
    }

    /// The value, inflated when compressed. `bytes` must have passed ``validate(_:)``.
    package static func value(_ bytes: UnsafeRawBufferPointer, header: Header) throws(Damage) -> [UInt8] {
        let payload = UnsafeRawBufferPointer(rebasing: bytes[header.payloadOffset...])
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
