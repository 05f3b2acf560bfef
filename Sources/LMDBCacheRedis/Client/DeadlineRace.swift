#if Redis
import Synchronization

/// Runs `operation` until `deadline`: returns its result, or throws `RedisClientError.timedOut`
/// at the deadline even if the operation has not noticed it (it is then cancelled and finishes
/// in the background). Cancelling the caller cancels the operation and throws
/// `CancellationError`.
///
/// So a caller waits no longer than its timeout whatever a node, a refresh or a socket does.
func raceAgainstDeadline<Result: Sendable>(
    _ deadline: ContinuousClock.Instant,
    _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    let race = DeadlineRace<Result>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.start(continuation, deadline: deadline, operation: operation)
        }
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The two contestants of ``raceAgainstDeadline(_:_:)`` and the continuation the first to
/// finish resumes.
private final class DeadlineRace<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var contestants: [Task<Void, Never>] = []
        /// Set when the race ended before it started (the caller was already cancelled).
        var early: Result<Value, any Error>?
        var finished = false
    }

    private let state = Mutex(State())

    func start(
        _ continuation: CheckedContinuation<Value, any Error>,
        deadline: ContinuousClock.Instant,
        operation: @escaping @Sendable () async throws -> Value
    ) {
        let early: Result<Value, any Error>? = state.withLock { state in
            if let early = state.early { return early }
            state.continuation = continuation
            state.contestants = [
                Task {
                    do {
                        self.finish(.success(try await operation()))
                    } catch {
                        self.finish(.failure(error))
                    }
                },
                Task {
                    do {
                        try await Task.sleep(until: deadline, clock: .continuous)
                        self.finish(.failure(RedisClientError.timedOut))
                    } catch {
                        // Cancelled: the operation finished first.
                    }
                },
            ]
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    /// Ends the race with `result` unless it has ended already.
    func finish(_ result: Result<Value, any Error>) {
        let (continuation, contestants) = state.withLock { state in
            guard !state.finished else { return (nil as CheckedContinuation<Value, any Error>?, [Task<Void, Never>]()) }
            state.finished = true
            if state.continuation == nil { state.early = result }
            defer {
                state.continuation = nil
                state.contestants = []
            }
            return (state.continuation, state.contestants)
        }
        continuation?.resume(with: result)
        for contestant in contestants { contestant.cancel() }
    }
}
#endif
