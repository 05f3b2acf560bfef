import LMDBCacheStorage

/// A result that arrives once, for any number of waiters; a waiter that is cancelled stops
/// waiting (with `CancellationError`) and no one else is affected.
final class LoadPromise<Result: Sendable>: Sendable {
    private struct State {
        var result: Result?
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Result, any Error>] = [:]
    }

    private let state = Locked(State())

    /// What a new waiter does.
    private enum Start {
        case wait, resume(Result), cancel
    }

    /// Hands `result` to every waiter, now and later. Only the first call counts.
    func fulfill(_ result: Result) {
        let waiters = state.withLock { state -> [CheckedContinuation<Result, any Error>] in
            guard state.result == nil else { return [] }
            state.result = result
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: result) }
    }

    /// The result, once it arrives.
    func value() async throws -> Result {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Result, any Error>) in
                let start = state.withLock { state -> Start in
                    if let result = state.result { return .resume(result) }
                    if Task.isCancelled { return .cancel }
                    state.waiters[id] = waiter
                    return .wait
                }
                switch start {
                case .wait: break
                case .resume(let result): waiter.resume(returning: result)
                case .cancel: waiter.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
