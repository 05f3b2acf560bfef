import Foundation
import Testing

@testable import LMDBCache

/// Canonically equal strings are one key (Swift's `==`), so they must be one key on disk too.
@Suite("String keys: canonically equal strings are one key in both tiers")
struct StringKeyNormalizationTests {
    /// "café" precomposed and decomposed; "한" as one syllable and as its three jamo; "Å" as the
    /// Angstrom sign, the precomposed letter and A plus a combining ring.
    static let equalPairs: [(String, String)] = [
        ("caf\u{E9}", "cafe\u{301}"),
        ("\u{D55C}", "\u{1112}\u{1161}\u{11AB}"),
        ("\u{212B}", "A\u{30A}"),
        ("\u{C5}x", "\u{212B}x"),
    ]

    @Test("canonically equal strings give the same key bytes: the UTF-8 of their NFC form")
    func equalStringsEqualBytes() {
        for (left, right) in Self.equalPairs {
            #expect(left == right, "Swift calls them equal")
            #expect(left.cacheKeyBytes == right.cacheKeyBytes, "\(Array(left.utf8)) vs \(Array(right.utf8))")
            #expect(left.cacheKeyBytes == Array(left.precomposedStringWithCanonicalMapping.utf8))
            #expect(String(cacheKeyBytes: left.cacheKeyBytes) == left)
        }
        let ascii = "plain-ascii key 123"
        #expect(ascii.cacheKeyBytes == Array(ascii.utf8), "ASCII is already NFC")
        let latin1 = "na\u{EF}ve \u{C5}ngstr\u{F6}m"
        #expect(latin1.cacheKeyBytes == Array(latin1.utf8), "below U+0300 is already NFC")
    }

    @Test("a disk cache stores canonically equal String keys as one entry")
    func diskCacheOneEntry() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        for (index, (left, right)) in Self.equalPairs.enumerated() {
            try disk.setData([UInt8(index)], forKey: left)
            try disk.setData([UInt8(index), 1], forKey: right)
            try disk.flush()
            #expect(try disk.data(forKey: left) == [UInt8(index), 1])
            #expect(try disk.containsData(forKey: right))
        }
        #expect(disk.totalCount == Self.equalPairs.count, "one entry per pair")
        try disk.removeData(forKey: "cafe\u{301}")
        try disk.flush()
        #expect(try disk.data(forKey: "caf\u{E9}") == nil, "removed under the other spelling")
    }

    @Test("a two-tier cache finds a value under an equal spelling after it left memory and after a reopen")
    func cacheAcrossRestart() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        do {
            let cache = try Cache<String, [UInt8]>(directory: dir.url, configuration: .init())
            cache.insert([7], forKey: "caf\u{E9}")
            cache.insert([8], forKey: "cafe\u{301}")
            try cache.flush()
            cache.close()
        }
        let disk = try DiskCache(directory: dir.url)
        #expect(disk.totalCount == 1, "one entry on disk")
        disk.close()
        let cache = try Cache<String, [UInt8]>(directory: dir.url, configuration: .init())
        defer { cache.close() }
        #expect(cache["caf\u{E9}"] == [8])
        #expect(cache["cafe\u{301}"] == [8])
    }
}
