import Foundation
import PropertyBased
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// How many random sequences the model-based tests run, and which seed reproduces one.
///
/// - `LMDBCACHE_MODEL_SEQUENCES`: sequences per model test (default: the test's own count;
///   `scripts/test` lowers it under the sanitizers, `scripts/soak` raises it).
/// - `LMDBCACHE_MODEL_SEED`: the base64 seed a failure printed (`.fixedSeed("…")`): the test runs
///   that one sequence again, shrinks it and prints it. Pair it with `--filter` for that test,
///   and with `SWIFT_DETERMINISTIC_HASHING=1`: Swift seeds hashing per process, and the memory
///   tier places keys in shards by hash.
enum ModelRun {
    static func sequences(default count: Int) -> Int {
        guard let text = ProcessInfo.processInfo.environment["LMDBCACHE_MODEL_SEQUENCES"], let value = Int(text)
        else { return count }
        return max(0, value)
    }

    /// The fixed seed from `LMDBCACHE_MODEL_SEED`, else a trait that changes nothing.
    static var seed: any TestTrait {
        guard let text = ProcessInfo.processInfo.environment["LMDBCACHE_MODEL_SEED"],
            let data = Data(base64Encoded: text), data.count == 32
        else { return .enabled(if: true) }
        // The library's seed string is the generator's four state words in memory order.
        let words = (0..<4).map { index in
            data.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self) }
        }
        return .fixedSeed(words[0], words[1], words[2], words[3])
    }

    /// Sequences and steps run, per tier, for the summary line each test prints.
    static let tally = Locked<[String: (sequences: Int, steps: Int)]>([:])

    static func count(_ tier: String, steps: Int) {
        tally.withLock {
            $0[tier, default: (0, 0)].sequences += 1; $0[tier, default: (0, 0)].steps += steps
        }
    }

    static func summary(_ tier: String) -> String {
        let (sequences, steps) = tally.withLock { $0[tier] ?? (0, 0) }
        return "model \(tier): \(sequences) sequences run (shrinking runs included), \(steps) steps"
    }
}

/// Stops a sequence at its first disagreement with the model, so one fault gives one issue and
/// shrinking compares like with like.
struct ModelCheck {
    private(set) var failed = false
    /// The first disagreement's message (for a runner that prints it beside the shrunk input).
    private(set) var message: String?

    mutating func expect(
        _ condition: Bool, _ message: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard !failed, !condition else { return }
        failed = true
        let text = message()
        self.message = text
        Issue.record(Comment(rawValue: text), sourceLocation: sourceLocation)
    }
}
