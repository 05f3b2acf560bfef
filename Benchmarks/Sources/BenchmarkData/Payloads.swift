/// The kinds of value the benchmarks store.
public enum Payload: String, CaseIterable, Codable, Sendable {
    /// 100 bytes of JSON-like text (below the default compression threshold, so stored as is).
    case json100
    /// 4 KiB of JSON-like text (compresses about 2-3×).
    case json4K
    /// 4 KiB of random bytes (incompressible).
    case random4K

    /// Bytes per value.
    public var size: Int {
        switch self {
        case .json100: return 100
        case .json4K, .random4K: return 4_096
        }
    }

    /// A short label for the report, e.g. `4 KB json`.
    public var label: String {
        switch self {
        case .json100: return "100 B json"
        case .json4K: return "4 KB json"
        case .random4K: return "4 KB random"
        }
    }

    /// `count` distinct values of this kind; value `i` of a benchmark is `pool[i % count]`.
    ///
    /// A pool keeps memory small at a million keys while every compression still does real work.
    public func pool(count: Int, seed: UInt64) -> [[UInt8]] {
        var random = SplitMix64(seed: seed ^ UInt64(size))
        return (0..<count).map { _ in
            switch self {
            case .json100, .json4K: return JSONText.make(size: size, using: &random)
            case .random4K: return randomBytes(count: size, using: &random)
            }
        }
    }
}

/// Random bytes, eight at a time.
public func randomBytes(count: Int, using random: inout SplitMix64) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        var index = 0
        while index < count {
            var word = random.next()
            for _ in 0..<min(8, count - index) {
                buffer[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
        initialized = count
    }
}

/// Generates text shaped like a JSON API response: an array of small objects with ids, names,
/// tags, numbers and a sentence of words from a fixed vocabulary.
public enum JSONText {
    private static let words = [
        "cache", "swift", "linux", "server", "request", "response", "latency", "memory", "disk",
        "value", "record", "index", "commit", "reader", "writer", "batch", "page", "tree", "leaf",
        "branch", "node", "shard", "lock", "thread", "queue", "timer", "service", "client", "token",
        "session", "user", "article", "comment", "title", "body", "status", "error", "retry",
        "region", "zone", "metric", "counter", "gauge", "trace", "span", "event", "stream", "buffer",
        "the", "a", "of", "and", "to", "in", "is", "for", "on", "with", "as", "by", "at", "from",
    ]
    private static let names = ["Ada", "Grace", "Linus", "Barbara", "Dennis", "Ken", "Margaret", "Edsger"]
    private static let statuses = ["active", "pending", "archived", "deleted"]

    /// Exactly `size` bytes of JSON-like text (the last object is cut off at the limit).
    public static func make(size: Int, using random: inout SplitMix64) -> [UInt8] {
        var text = "["
        while text.utf8.count < size {
            if text.utf8.count > 1 { text += "," }
            text += object(using: &random)
        }
        return Array(text.utf8.prefix(size))
    }

    private static func object(using random: inout SplitMix64) -> String {
        let id = String(random.next() & 0xFF_FFFF_FFFF, radix: 16)
        let name = names.randomElement(using: &random)!
        let tags = (0..<Int.random(in: 1...3, using: &random)).map { _ in
            "\"\(words.randomElement(using: &random)!)\""
        }
        let sentence = (0..<Int.random(in: 6...14, using: &random)).map { _ in
            words.randomElement(using: &random)!
        }
        return #"{"id":"\#(id)","author":{"name":"\#(name)","id":\#(Int.random(in: 1...99_999, using: &random))},"#
            + #""status":"\#(statuses.randomElement(using: &random)!)","tags":[\#(tags.joined(separator: ","))],"#
            + #""score":\#(Int.random(in: 0...1_000, using: &random)),"body":"\#(sentence.joined(separator: " "))"}"#
    }
}

/// `count` distinct keys such as `item:9f3c0a51d2e4b786` (21 bytes), in no sorted order, so
/// inserts land all over the B-tree as a real cache's hashed or random keys do.
public func makeKeys(count: Int, salt: UInt64) -> [[UInt8]] {
    (0..<count).map { index in
        let hex = String(SplitMix64.mix(UInt64(index) ^ salt), radix: 16)
        return Array("item:\(String(repeating: "0", count: 16 - hex.utf8.count))\(hex)".utf8)
    }
}

/// A random permutation of `0..<count`.
public func shuffledIndices(count: Int, seed: UInt64) -> [Int] {
    var random = SplitMix64(seed: seed)
    var indices = Array(0..<count)
    indices.shuffle(using: &random)
    return indices
}
