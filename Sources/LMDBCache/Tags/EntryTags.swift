/// The tags an entry carries, checked against the limits every tier shares.
///
/// A tag is a non-empty string of at most ``maxLength`` UTF-8 bytes; an entry carries at most
/// ``maxCount`` distinct tags. Tags are compared as Swift strings are (canonical equivalence) in
/// memory and by the UTF-8 bytes of their Normalization Form C on disk, so the two agree.
/// Stored sorted by those bytes and without duplicates, so an entry's tags have one form.
@usableFromInline
package struct EntryTags: Sendable, Hashable {
    /// Most distinct tags one entry carries.
    package static let maxCount = 32
    /// Longest tag, in UTF-8 bytes (NFC).
    package static let maxLength = 255

    /// The tags, sorted by their stored bytes, without duplicates.
    @usableFromInline package let tags: [String]
    /// Each tag's stored bytes (NFC, UTF-8), in the order of ``tags``.
    @usableFromInline package let bytes: [[UInt8]]

    /// No tags.
    @usableFromInline package static let none = EntryTags(checked: [])

    @inlinable package var isEmpty: Bool { tags.isEmpty }

    /// Checks `tags` against the limits.
    ///
    /// - Throws: ``CacheError/invalidTag(reason:)`` for an empty tag, a tag past ``maxLength``
    ///   bytes, or more than ``maxCount`` distinct tags.
    package init(_ tags: some Sequence<String>) throws(CacheError) {
        var unique: [[UInt8]: String] = [:]
        for tag in tags {
            let bytes = try Self.storedBytes(of: tag)
            unique[bytes] = unique[bytes] ?? tag
            if unique.count > Self.maxCount {
                throw .invalidTag(reason: "an entry carries at most \(Self.maxCount) tags")
            }
        }
        self.init(checked: unique.keys.sorted { $0.lexicographicallyPrecedes($1) })
    }

    /// Tags whose stored bytes were checked already (read back from a record), sorted and unique.
    @usableFromInline package init(checked bytes: [[UInt8]]) {
        self.bytes = bytes
        tags = bytes.map { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes `tag` is stored and indexed under: its NFC form in UTF-8, checked.
    ///
    /// - Throws: ``CacheError/invalidTag(reason:)`` for an empty tag or one past ``maxLength`` bytes.
    package static func storedBytes(of tag: String) throws(CacheError) -> [UInt8] {
        // The key codec's normalisation: tags and keys agree on what one string is.
        let bytes = tag.cacheKeyBytes
        guard !bytes.isEmpty else { throw .invalidTag(reason: "a tag must not be empty") }
        guard bytes.count <= Self.maxLength else {
            throw .invalidTag(reason: "a tag holds at most \(Self.maxLength) UTF-8 bytes; this one has \(bytes.count)")
        }
        return bytes
    }

    /// The 8 bytes the disk tier's tag index files a tag under: the low half of its 128-bit
    /// FNV-1a digest, big-endian. Two tags may share them; a removal by tag checks the record's
    /// own tags, so a collision costs a look, never a wrong removal.
    package static func indexPrefix(_ storedBytes: [UInt8]) -> [UInt8] {
        let digest = UInt64(truncatingIfNeeded: StorageKey.digest(storedBytes))
        return (0..<8).map { UInt8(truncatingIfNeeded: digest >> UInt64(56 - 8 * $0)) }
    }
}
