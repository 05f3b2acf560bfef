import Testing

@testable import LMDBCache

/// The tags section of a record (flag 4): written by `Record.encode`, read back by
/// `Record.validate`, `Record.tags`, `Record.carries` and `Record.value`, and rejected whole when
/// any byte of it (or of the rest of the record) is damaged.
@Suite("Tags: the record's tags section")
struct RecordTagTests {
    static let now: UInt64 = 1_800_000_000_000
    static let shortKey = Array("article:1".utf8)
    static let longKey = [UInt8](repeating: 0x70, count: 600) + Array("e\u{301}".utf8)

    static func tags(_ strings: [String]) -> EntryTags {
        try! EntryTags(strings)
    }

    /// 32 tags of 255 bytes each: the largest tags section (8,193 bytes).
    static let largestTags = tags(
        (0..<32).map { index in (index < 10 ? "0\(index)" : "\(index)") + String(repeating: "x", count: 253) })

    static let tagSets: [(name: String, tags: EntryTags)] = [
        ("none", .none),
        ("one", tags(["a"])),
        ("several, unicode", tags(["author:42", "feed", "caf\u{E9}", "\u{1F600}", "z"])),
        ("32 × 255 bytes", largestTags),
    ]

    static let values: [(name: String, bytes: [UInt8])] = [
        ("empty", []),
        ("100 random bytes", sampleBytes(count: 100, compressible: false)),
        ("5,000 compressible bytes", sampleBytes(count: 5_000, compressible: true)),
    ]

    static func encode(
        _ value: [UInt8], key: [UInt8], tags: EntryTags, staleWindow: Bool, threshold: Int? = 64
    ) -> [UInt8] {
        let storageKey = try! StorageKey(key)
        return value.withUnsafeBytes {
            Record.encode(
                value: $0, key: storageKey, now: now, expires: staleWindow ? now + 10_000 : now + 5_000,
                staleUntil: staleWindow ? now + 20_000 : 0, tags: tags, threshold: threshold, level: 1)
        }
    }

    /// `bytes` with its checksum recomputed: a forgery that passes the checksum, so the header's
    /// own checks are what must reject it.
    static func resealed(_ bytes: [UInt8]) -> [UInt8] {
        var copy = bytes
        let sum = copy.withUnsafeBytes { Record.checksum($0) }
        copy.withUnsafeMutableBytes { $0.storeLE(sum, at: 4) }
        return copy
    }

    /// Reads everything a caller reads of a record whose header parsed, checked or not: it must
    /// not trap whatever the bytes. Returns the tags.
    @discardableResult
    static func readAll(_ bytes: UnsafeRawBufferPointer, header: Record.Header) -> EntryTags {
        let tags = Record.tags(bytes, header: header)
        for tag in tags.bytes { _ = Record.carries(bytes, header: header, tag: tag) }
        _ = Record.carries(bytes, header: header, tag: [0x61])
        _ = Record.fullKey(bytes, header: header)
        _ = try? Record.value(bytes, header: header)
        return tags
    }

    @Test(
        "encode with tags round-trips through validate, tags, carries and value: every key, value, window and tag set",
        arguments: [false, true], [false, true])
    func roundTrip(longKey: Bool, staleWindow: Bool) throws {
        let key = longKey ? Self.longKey : Self.shortKey
        let storageKey = try StorageKey(key)
        for (tagName, tags) in Self.tagSets {
            for (valueName, value) in Self.values {
                for threshold in [nil, 64] as [Int?] {
                    let context = "\(tagName) tags, \(valueName), threshold \(threshold.map(String.init) ?? "off")"
                    let record = Self.encode(
                        value, key: key, tags: tags, staleWindow: staleWindow, threshold: threshold)
                    try record.withUnsafeBytes { bytes in
                        let header = try Record.validate(bytes, storedKey: storageKey.bytes)
                        #expect(header.flags.contains(.tagged) == !tags.isEmpty, "\(context)")
                        #expect(header.flags.contains(.fullKey) == longKey, "\(context)")
                        #expect(header.tagsLength == Record.tagsLength(tags), "\(context)")
                        #expect(
                            header.tagsLength == (tags.isEmpty ? 0 : 1 + tags.bytes.reduce(0) { $0 + 1 + $1.count }),
                            "\(context): one count byte, then a length byte per tag")
                        #expect(header.version == (staleWindow ? Record.staleWindowVersion : Record.formatVersion))
                        #expect(header.staleUntil == (staleWindow ? Self.now + 20_000 : 0))
                        #expect(header.expires == (staleWindow ? Self.now + 10_000 : Self.now + 5_000))
                        #expect(header.created == Self.now)
                        #expect(header.valueLength == value.count)
                        #expect(
                            header.flags.contains(.compressed) == (threshold != nil && value.count == 5_000),
                            "\(context): only the compressible value deflates")
                        #expect(header.payloadOffset == header.size + header.keyLength + header.tagsLength)
                        #expect(Record.tags(bytes, header: header) == tags, "\(context)")
                        for tag in tags.bytes {
                            #expect(Record.carries(bytes, header: header, tag: tag), "\(context)")
                            #expect(!Record.carries(bytes, header: header, tag: tag + [0x21]), "\(context): longer")
                            if tag.count > 1 {
                                #expect(
                                    !Record.carries(bytes, header: header, tag: Array(tag.dropLast())), "\(context)")
                            }
                        }
                        #expect(!Record.carries(bytes, header: header, tag: Array("b".utf8)), "\(context)")
                        #expect(!Record.carries(bytes, header: header, tag: []), "\(context)")
                        #expect(try Record.value(bytes, header: header) == value, "\(context)")
                        #expect(Record.matches(bytes, header: header, key: storageKey), "\(context)")
                        #expect(Record.fullKey(bytes, header: header) == (longKey ? key : nil), "\(context)")
                        let read = try #require(try Record.read(bytes, key: storageKey, now: Self.now))
                        #expect(read.value == value)
                    }
                }
            }
        }
    }

    @Test("EntryTags stores tags sorted by their NFC bytes, once each, and the record keeps that order")
    func storedOrder() throws {
        let tags = Self.tags(["zeta", "cafe\u{301}", "alpha", "caf\u{E9}", "\u{212B}", "A\u{30A}"])
        #expect(tags.bytes.count == 4, "canonically equal spellings are one tag")
        #expect(tags.bytes == tags.bytes.sorted { $0.lexicographicallyPrecedes($1) })
        #expect(tags.bytes.contains(Array("caf\u{E9}".utf8)), "stored in NFC")
        #expect(tags.bytes.contains(Array("\u{C5}".utf8)), "U+212B and A+U+030A are U+00C5 in NFC")
        let record = Self.encode([1, 2, 3], key: Self.shortKey, tags: tags, staleWindow: false)
        try record.withUnsafeBytes { bytes in
            let header = try Record.validate(bytes)
            #expect(Record.tags(bytes, header: header) == tags)
            #expect(Record.carries(bytes, header: header, tag: try EntryTags.storedBytes(of: "cafe\u{301}")))
            #expect(!Record.carries(bytes, header: header, tag: Array("cafe\u{301}".utf8)), "compared as NFC bytes")
        }
    }

    /// The records the damage tests use: small enough for every byte × every value.
    static let damageCases: [(name: String, record: [UInt8])] = [
        (
            "short key, tags, raw",
            encode(Array("value".utf8), key: shortKey, tags: tags(["a", "bc", "def"]), staleWindow: false)
        ),
        (
            "short key, tags, stale window, empty value",
            encode([], key: shortKey, tags: tags(["author:42", "feed"]), staleWindow: true)
        ),
        (
            "long key, tags, compressed, stale window",
            encode(
                sampleBytes(count: 1_500, compressible: true), key: longKey, tags: tags(["x", "yy"]), staleWindow: true)
        ),
    ]

    @Test("every single-byte change to a tagged record is rejected by validate, and reading its parts never traps")
    func everySingleByteChangeIsRejected() {
        for (name, record) in Self.damageCases {
            var missed: [String] = []
            for offset in 0..<record.count {
                for delta in 1...255 {
                    var damaged = record
                    damaged[offset] ^= UInt8(delta)
                    damaged.withUnsafeBytes { bytes in
                        if let header = Record.Header(bytes) { Self.readAll(bytes, header: header) }
                        if (try? Record.validate(bytes)) != nil, missed.count < 5 {
                            missed.append("offset \(offset) ^ \(delta)")
                        }
                    }
                }
            }
            #expect(missed.isEmpty, "\(name): accepted after a change at \(missed)")
        }
    }

    @Test("every truncation of a tagged record is rejected")
    func everyTruncationIsRejected() {
        for (name, record) in Self.damageCases {
            for length in 0..<record.count {
                let cut = Array(record[..<length])
                cut.withUnsafeBytes { bytes in
                    if let header = Record.Header(bytes) { Self.readAll(bytes, header: header) }
                    #expect((try? Record.validate(bytes)) == nil, "\(name): accepted cut to \(length) bytes")
                }
                // Resealed, the checksum no longer stands between the cut and the header's checks.
                let resealed = length >= Record.headerSize ? Self.resealed(cut) : cut
                resealed.withUnsafeBytes { bytes in
                    if let header = Record.Header(bytes) { Self.readAll(bytes, header: header) }
                }
            }
        }
    }

    /// A raw, short-key, format-2 record whose tags section starts at byte 32.
    static func plainTagged(_ tags: [String], value: [UInt8] = Array("vvvv".utf8)) -> [UInt8] {
        encode(value, key: shortKey, tags: Self.tags(tags), staleWindow: false, threshold: nil)
    }

    @Test("a malformed tags section is rejected by the header even when the checksum is made to match")
    func malformedSectionsRejected() {
        let base = Self.plainTagged(["a", "bc"])
        // Section: [2, 1, "a", 2, "b", "c"] at offset 32, then "vvvv".
        #expect(Array(base[32..<38]) == [2, 1, 0x61, 2, 0x62, 0x63])
        var cases: [(String, [UInt8])] = []
        var edited = base
        edited[32] = 0
        cases.append(("a count of 0", edited))
        edited = base
        edited[32] = 33
        cases.append(("a count of 33", edited))
        edited = base
        edited[33] = 0
        cases.append(("a tag of length 0", edited))
        edited = base
        edited[35] = 200
        cases.append(("a tag running past the end", edited))
        edited = base
        edited[32] = 3
        cases.append(("a count past the tags there are", edited))
        edited = base
        edited[1] &= ~4
        cases.append(("flag 4 cleared with the section present", edited))
        let untagged = Self.encode([], key: Self.shortKey, tags: .none, staleWindow: false, threshold: nil)
        edited = untagged
        edited[1] |= 4
        cases.append(("flag 4 set with no section (record ends at the header)", edited))
        edited = Self.plainTagged(["a"], value: [])
        edited.removeLast()
        cases.append(("the section's last byte cut", edited))
        edited = base
        edited[1] |= 8
        cases.append(("an unknown flag", edited))
        for (name, bytes) in cases {
            let resealed = Self.resealed(bytes)
            resealed.withUnsafeBytes { raw in
                #expect(Record.Header(raw) == nil, "\(name): parsed")
                #expect(throws: Record.Damage.header, "\(name)") { try Record.validate(raw) }
            }
        }
    }

    @Test("random forged records (checksum made to match) never trap a reader")
    func randomForgeries() {
        var generator = SystemRandomNumberGenerator()
        var parsed = 0
        for _ in 0..<20_000 {
            var bytes = (0..<Int.random(in: 32...120, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            bytes[0] = UInt8.random(in: 1...3, using: &generator)
            bytes[1] = UInt8.random(in: 0...7, using: &generator)
            // Lengths small enough to land inside the record now and then.
            let valueLength = UInt32.random(in: 0...64, using: &generator)
            let keyLength = UInt32(bytes[1] & 2 == 0 ? 0 : Int.random(in: 1...16, using: &generator))
            bytes.withUnsafeMutableBytes { raw in
                raw.storeLE(valueLength, at: 24)
                raw.storeLE(keyLength, at: 28)
            }
            let sealed = Self.resealed(bytes)
            sealed.withUnsafeBytes { raw in
                guard let header = try? Record.validate(raw) else { return }
                parsed += 1
                Self.readAll(raw, header: header)
            }
        }
        // Not an expectation on the generator's luck: the point is that none trapped.
        print("random forgeries: \(parsed) of 20,000 parsed as records")
    }
}
