import Foundation
import Synchronization

@testable import LMDBCache

/// A fresh directory under the system's temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let url: URL
    var path: String { url.path }

    init(_ label: String = #function) {
        let name = label.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("lmdbcache-tests-\(name)-\(UUID().uuidString)")
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        current = Mutex(start)
    }

    var clock: CacheClock { CacheClock { self.current.withLock { $0 } } }

    func advance(by duration: Duration) {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        current.withLock { $0 += seconds }
    }
}

/// Deterministic bytes: `compressible` ones look like JSON text, the others are random.
func sampleBytes(count: Int, compressible: Bool, seed: UInt64 = 42) -> [UInt8] {
    if compressible {
        let text = Array(#"{"id":"article-000","title":"Caching on Linux","body":"lorem ipsum dolor sit amet "}"#.utf8)
        return (0..<count).map { text[$0 % text.count] }
    }
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}
