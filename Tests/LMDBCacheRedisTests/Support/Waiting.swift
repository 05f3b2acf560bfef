#if Redis
import Synchronization
import Testing

/// How long a test waits for something expected (a write to reach Redis, a reconnection, a
/// command to a live server) before it reports a hang. Generous on purpose: only a hang reaches
/// it, never a busy machine. No test's verdict depends on how long anything took.
let hangBound: Duration = .seconds(300)

/// Waits until `condition` holds, polling it; whether it held. The wait is for the event itself:
/// its only bound, `hangAfter`, is a hang, recorded as an issue "hung: `what` did not happen
/// within N s" (the result lets a caller that cannot go on without it stop).
@discardableResult
func waitFor(
    _ what: String, hangAfter bound: Duration = hangBound, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: @Sendable () async -> Bool
) async -> Bool {
    let end = ContinuousClock.now + bound
    while ContinuousClock.now < end {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    if await condition() { return true }
    Issue.record("hung: \(what) did not happen within \(bound)", sourceLocation: sourceLocation)
    return false
}

/// Values callbacks deliver from other threads, in order, for a test to look at.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])

    /// Appends one value.
    func record(_ value: Value) { values.withLock { $0.append(value) } }

    /// Everything recorded so far.
    var all: [Value] { values.withLock { $0 } }
}
#endif
