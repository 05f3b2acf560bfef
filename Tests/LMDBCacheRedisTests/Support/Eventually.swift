#if Redis
import Synchronization

/// Waits until `condition` holds, polling it, for at most `deadline` (default: a generous 20 s);
/// whether it held. The deadline only bounds a wait for something expected: no test asserts timing.
func eventually(
    within deadline: Duration = .seconds(20), _ condition: @Sendable () async -> Bool
) async -> Bool {
    let end = ContinuousClock.now + deadline
    while ContinuousClock.now < end {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await condition()
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
