import Foundation

/// Runs a library call that reports no progress of its own while a second thread polls `done`
/// into `progress` (only when the bar is shown).
enum PolledProgress {
    static func run(_ progress: ProgressBar, done: @escaping @Sendable () -> Int, _ body: () throws -> Void) rethrows {
        guard progress.isShown else { return try body() }
        /// Whether the call has ended; guarded by its condition.
        final class State: @unchecked Sendable {
            let condition = NSCondition()
            var isFinished = false
        }
        let state = State()
        let exited = DispatchSemaphore(value: 0)
        Thread {
            state.condition.lock()
            while !state.isFinished {
                state.condition.unlock()
                progress.update(done())
                state.condition.lock()
                _ = state.condition.wait(until: Date().addingTimeInterval(0.1))
            }
            state.condition.unlock()
            exited.signal()
        }.start()
        defer {
            state.condition.lock()
            state.isFinished = true
            state.condition.signal()
            state.condition.unlock()
            exited.wait()
            progress.finish()
        }
        try body()
    }
}
