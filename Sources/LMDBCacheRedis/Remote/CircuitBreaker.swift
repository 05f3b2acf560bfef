#if Redis
import Logging
import NIOConcurrencyHelpers

/// Keeps a failing Redis from costing every call its timeout: after ``threshold`` consecutive
/// failures the circuit opens and calls are refused at once; after ``openDuration`` one call (the
/// probe) is let through, and its success closes the circuit, its failure opens it again.
/// Each change of state is logged once, not each refused call.
final class CircuitBreaker: Sendable {
    private struct State {
        var consecutiveFailures = 0
        /// When open: the instant the next probe may go (`ContinuousClock`).
        var openUntil: ContinuousClock.Instant?
        var probing = false
        var openings = 0
    }

    let threshold: Int
    let openDuration: Duration
    private let state = NIOLockedValueBox(State())
    private let logger: Logger
    /// Told of each change of state: true when the circuit opens, false when it closes.
    private let onChange: @Sendable (Bool) -> Void

    init(threshold: Int, openDuration: Duration, logger: Logger, onChange: @escaping @Sendable (Bool) -> Void = { _ in }) {
        self.threshold = max(1, threshold)
        self.openDuration = openDuration
        self.logger = logger
        self.onChange = onChange
    }

    /// Whether a call may go to Redis now: true while closed, and for one probe once the open
    /// period is over.
    func allows() -> Bool {
        state.withLockedValue { state in
            guard let until = state.openUntil else { return true }
            guard !state.probing, ContinuousClock.now >= until else { return false }
            state.probing = true
            return true
        }
    }

    /// When a refused call may retry: the end of the open period (now when closed).
    var retryAt: ContinuousClock.Instant {
        state.withLockedValue { $0.openUntil ?? .now }
    }

    /// A call succeeded: the circuit closes.
    func succeeded() {
        let closed = state.withLockedValue { state -> Bool in
            state.consecutiveFailures = 0
            state.probing = false
            guard state.openUntil != nil else { return false }
            state.openUntil = nil
            return true
        }
        if closed {
            onChange(false)
            logger.notice("LMDBCache's Redis tier answers again; circuit closed")
        }
    }

    /// A call failed: counted; the circuit opens at the threshold, or again after a failed probe.
    func failed(_ error: any Error) {
        let opened = state.withLockedValue { state -> Bool in
            state.consecutiveFailures += 1
            let wasProbe = state.probing
            state.probing = false
            if wasProbe || (state.openUntil == nil && state.consecutiveFailures >= threshold) {
                let first = state.openUntil == nil
                state.openUntil = .now + openDuration
                if first { state.openings += 1 }
                return first
            }
            return false
        }
        if opened {
            onChange(true)
            logger.warning(
                "LMDBCache's Redis tier is failing; circuit open, local tiers serve alone",
                metadata: ["error": "\(error)", "failures": "\(threshold)"])
        }
    }

    /// Times the circuit opened (a failed probe keeps it open and is not counted again).
    var openings: Int { state.withLockedValue { $0.openings } }
    /// Whether it is open now.
    var isOpen: Bool { state.withLockedValue { $0.openUntil != nil } }
}
#endif
