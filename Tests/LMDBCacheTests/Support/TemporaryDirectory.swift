@_exported import CacheTestSupport
import Foundation

@testable import LMDBCache

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let current: Locked<Date>

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        current = Locked(start)
    }

    var clock: CacheClock { CacheClock { self.current.withLock { $0 } } }

    func advance(by duration: Duration) {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        current.withLock { $0 += seconds }
    }
}
