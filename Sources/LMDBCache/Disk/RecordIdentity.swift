/// What tells one stored record from another of the same key: its write time, checksum and
/// length. A reader that could not use a record names it by this, so the writer removes that
/// record only if the key still holds it, never a newer write that replaced it in the meantime.
struct RecordIdentity: Sendable, Hashable {
    /// Milliseconds since 1970 of the write.
    var created: UInt64
    /// The crc32 the record carries (over the whole record: value, expiry, key tag).
    var checksum: UInt32
    var length: Int

    /// The identity of the record `bytes`; nil when they are too short to hold the header of the
    /// format their first byte names (32 bytes, 40 for format 3).
    init?(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= Record.headerSize,
            bytes.count >= Record.headerSize(version: bytes[Record.Offset.version])
        else { return nil }
        created = bytes.loadLE(UInt64.self, at: Record.Offset.created)
        checksum = bytes.loadLE(UInt32.self, at: Record.Offset.checksum)
        length = bytes.count
    }
}
