import Foundation
import LMDBCache
import Synchronization

/// A clock the test moves by hand, for a cache's `clock` setting.
public final class ManualClock: Sendable {
    private let current: Mutex<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        current = Mutex(start)
    }

    public var clock: CacheClock { CacheClock { self.current.withLock { $0 } } }

    public func advance(by duration: Duration) {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        current.withLock { $0 += seconds }
    }
}
