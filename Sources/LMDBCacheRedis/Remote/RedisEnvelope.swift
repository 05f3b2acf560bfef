#if Redis
/// What the tier keeps under a value key (`ns:v:KEY`): a record with the version of the write that
/// stored it and its end of life, or a removal's tombstone with its version.
///
/// | bytes | holds |
/// |---|---|
/// | `LCR1` + version (32) + end of life (12 hex digits, ms since 1970; 0: none) + record | a value, stored by the write of that version |
/// | `LCT1` + version (32) | a removal: no value, and no write older than it may store one |
///
/// A record's key lives in Redis at least as long as a tombstone would (past its end of life, as
/// a fence against older writes): past its end of life it is a miss. Anything else under a value
/// key (another program's value, a record of a release before versions) is foreign: a miss, and
/// replaced by the next write.
enum RedisEnvelope: Equatable {
    case record(RecordVersion, expires: UInt64, ArraySlice<UInt8>)
    case tombstone(RecordVersion)
    case foreign

    static let recordMagic = Array("LCR1".utf8)
    static let tombstoneMagic = Array("LCT1".utf8)
    /// A tombstone's length.
    static let tombstoneCount = 4 + RecordVersion.encodedCount
    /// Bytes before a record.
    static let headerCount = tombstoneCount + 12

    init(_ bytes: [UInt8]) {
        guard bytes.count >= Self.tombstoneCount,
            let version = RecordVersion(encoded: bytes[4..<Self.tombstoneCount])
        else {
            self = .foreign
            return
        }
        let magic = bytes[0..<4]
        if magic.elementsEqual(Self.recordMagic), bytes.count >= Self.headerCount,
            let expires = RecordVersion.hexNumber(bytes[Self.tombstoneCount..<Self.headerCount])
        {
            self = .record(version, expires: expires, bytes[Self.headerCount...])
        } else if magic.elementsEqual(Self.tombstoneMagic), bytes.count == Self.tombstoneCount {
            self = .tombstone(version)
        } else {
            self = .foreign
        }
    }

    /// The bytes stored for `record` written at `version`, living until `expires` (0: no end).
    static func storing(_ record: [UInt8], version: RecordVersion, expires: UInt64) -> [UInt8] {
        var bytes = recordMagic
        bytes.reserveCapacity(headerCount + record.count)
        bytes += version.encoded
        RecordVersion.appendHex(min(expires, RecordVersion.maximumMilliseconds), digits: 12, to: &bytes)
        bytes += record
        return bytes
    }

    /// The bytes of a tombstone at `version`.
    static func tombstone(version: RecordVersion) -> [UInt8] {
        tombstoneMagic + version.encoded
    }
}
#endif
