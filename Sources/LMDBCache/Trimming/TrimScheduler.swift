import Dispatch
import Foundation
import LMDBCacheStorage
import Logging

/// Runs a tier's trim pass every `interval` on a queue of its own, until stopped.
///
/// The pass holds a weak reference to its tier (the tier owns the scheduler), so a tier that goes
/// away stops being trimmed; the tier stops the scheduler in `close()` or `deinit`.
final class TrimScheduler: @unchecked Sendable {
    private let queue: DispatchQueue
    private let timer: DispatchSourceTimer
    private let isStopped = LockedFlag()
    /// Passes completed, for ``waitForPasses(_:)``.
    private let completed = NSCondition()
    private var passes = 0
    private let key = DispatchSpecificKey<Void>()

    /// Starts running `pass` every `interval` (the first one `interval` from now). `pass` returns
    /// how many entries it removed; each pass is counted, timed and logged at debug level.
    init(tier: CacheTier, interval: Duration, logger: Logger, pass: @escaping @Sendable () -> Int) {
        let recorder = TrimPassRecorder(tier: tier, logger: logger)
        queue = DispatchQueue(label: "LMDBCache.TrimScheduler.\(tier.rawValue)")
        queue.setSpecific(key: key, value: ())
        timer = DispatchSource.makeTimerSource(queue: queue)
        let nanoseconds = Int(Self.effectiveInterval(interval).nanoseconds)
        timer.schedule(
            deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds),
            leeway: .nanoseconds(nanoseconds / 10))
        timer.setEventHandler { [completed] in
            recorder.run(pass)
            completed.lock()
            self.passes += 1
            completed.broadcast()
            completed.unlock()
        }
        timer.resume()
    }

    /// The shortest interval a scheduler runs at: a zero or negative interval would otherwise
    /// run passes back to back.
    static let minimumInterval = Duration.milliseconds(5)
    /// The longest interval (``Duration/longestTimer``), so "never" (`.seconds(Int64.max)`) stays
    /// within what the timer's deadline arithmetic can add to the current time.
    static let maximumInterval = Duration.longestTimer

    /// `interval` raised to ``minimumInterval`` and lowered to ``maximumInterval``: what both
    /// tiers' schedulers and ``CacheTrimmingService`` run at.
    static func effectiveInterval(_ interval: Duration) -> Duration {
        min(max(interval, minimumInterval), maximumInterval)
    }

    /// Stops the timer and waits for a running pass to end (unless called from the pass itself).
    /// Calling it again does nothing.
    func stop() {
        guard isStopped.set() else { return }
        timer.cancel()
        if DispatchQueue.getSpecific(key: key) == nil { queue.sync {} }
    }

    var isRunning: Bool { !isStopped.value }

    /// Passes completed since the scheduler started.
    var completedPasses: Int {
        completed.lock()
        defer { completed.unlock() }
        return passes
    }

    /// Blocks until two more passes have completed, so that at least one whole pass ran after
    /// the call (for tests).
    func waitForFullPass() {
        waitForPasses(completedPasses + 2)
    }

    /// Blocks until `count` passes have completed since the scheduler started (for tests).
    func waitForPasses(_ count: Int) {
        completed.lock()
        defer { completed.unlock() }
        while passes < count { completed.wait() }
    }
}
