import CoreMetrics
import Synchronization

/// Counts the access updates LMDBCache's disk tier commits (its `lmdbcache_disk_access_updates_total`
/// counter, through swift-metrics): each moves one entry in the store's access order, two small
/// LMDB writes in a commit. The disk suite reports them per get; every other metric stays a no-op.
enum AccessUpdates {
    static let label = "lmdbcache_disk_access_updates_total"
    fileprivate static let total = Atomic<Int64>(0)

    /// Installs the counting factory; once per process, before any cache opens.
    static func bootstrap() {
        MetricsSystem.bootstrap(CountingFactory())
    }

    /// Updates committed since the process started.
    static var count: Int64 { total.load(ordering: .relaxed) }
}

private struct CountingFactory: MetricsFactory {
    func makeCounter(label: String, dimensions: [(String, String)]) -> CounterHandler {
        label == AccessUpdates.label ? AccessUpdateCounter() : NOOPMetricsHandler.instance
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> RecorderHandler {
        NOOPMetricsHandler.instance
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> TimerHandler {
        NOOPMetricsHandler.instance
    }

    func destroyCounter(_ handler: CounterHandler) {}
    func destroyRecorder(_ handler: RecorderHandler) {}
    func destroyTimer(_ handler: TimerHandler) {}
}

private final class AccessUpdateCounter: CounterHandler, Sendable {
    func increment(by amount: Int64) {
        AccessUpdates.total.add(amount, ordering: .relaxed)
    }

    func reset() {}
}
