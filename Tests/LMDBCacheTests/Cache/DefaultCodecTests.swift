import Foundation
import Testing

@testable import LMDBCache

/// Issue 14, item 7: a newcomer's first line compiles, and each built-in value type gets its
/// own codec without naming a configuration.
@Suite("A cache without a configuration")
struct DefaultCodecTests {
    struct Article: Codable, Sendable, Equatable {
        var id: String
        var body: String
    }

    @Test("each value type with a built-in codec gets that codec, and its values survive a reopen")
    func builtInCodecs() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        func check<Value: Codable & Sendable & Equatable>(
            _ value: Value, in folder: String, codec: (any ValueCodec<Value>) -> Bool
        ) throws {
            let url = dir.url.appendingPathComponent(folder)
            do {
                let cache = try Cache<String, Value>(directory: url)
                #expect(codec(cache.configuration.codec), "\(Value.self)")
                cache.insert(value, forKey: "k")
                cache.close()
            }
            let reopened = try Cache<String, Value>(directory: url)
            defer { reopened.close() }
            reopened.memory.removeAll()
            #expect(reopened.value(forKey: "k") == value, "\(Value.self) from disk")
        }
        try check("text", in: "string") { $0 is StringCodec }
        try check([1, 2, 3] as [UInt8], in: "bytes") { $0 is BytesCodec }
        try check(Data([4, 5]), in: "data") { $0 is DataCodec }
        try check(Article(id: "a", body: "b"), in: "json") { $0 is JSONCodec<Article> }
    }

    @Test("Cache(name:) with no configuration opens under the user's cache directory")
    func namedWithoutConfiguration() throws {
        let name = "lmdbcache-tests-\(UUID().uuidString)"
        let directory = try CacheDirectory.named(name)
        defer { try? FileManager.default.removeItem(at: directory) }
        let articles = try Cache<String, Article>(name: name)
        articles.insert(Article(id: "1", body: "hello"), forKey: "1")
        #expect(articles.value(forKey: "1") == Article(id: "1", body: "hello"))
        articles.close()
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("data.mdb").path))
    }
}
