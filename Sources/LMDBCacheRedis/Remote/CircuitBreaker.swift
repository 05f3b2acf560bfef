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

    /// What ``admit()`` decided for one call.
    enum Admission {
        /// Go: the circuit is closed.
        case closed
        /// Go as the probe of an open circuit: its outcome decides whether it closes.
        case probe
        /// Do not call Redis.
        case refused

        var allowed: Bool { self != .refused }
    }

    /// Whether a call may go to Redis now: while closed, and as the one probe once the open
    /// period is over. The call reports its outcome with ``succeeded(_:)`` or ``failed(_:_:)``.
    func admit() -> Admission {
        state.withLockedValue { state in
            guard let until = state.openUntil else { return .closed }
            guard !state.probing, ContinuousClock.now >= until else { return .refused }
            state.probing = true
            return .probe
        }
    }

    /// When a refused call may retry: the end of the open period (now when closed).
    var retryAt: ContinuousClock.Instant {
        state.withLockedValue { $0.openUntil ?? .now }
    }

    /// A call admitted as `admission` succeeded: Redis answers, the circuit closes (whichever
    /// call it was: one that started before the circuit opened proves it as well as the probe).
    func succeeded(_ admission: Admission) {
        let closed = state.withLockedValue { state -> Bool in
            state.consecutiveFailures = 0
            if admission == .probe { state.probing = false }
            guard state.openUntil != nil else { return false }
            state.openUntil = nil
            state.probing = false
            return true
        }
        if closed {
            onChange(false)
            logger.notice("LMDBCache's Redis tier answers again; circuit closed")
        }
    }

    /// A call admitted as `admission` failed: counted; the circuit opens at the threshold, and
    /// again for a whole open period when the probe fails. A call that started before the circuit
    /// opened and fails after changes nothing: only the probe's outcome counts while it is open.
    func failed(_ admission: Admission, _ error: any Error) {
        let opened = state.withLockedValue { state -> Bool in
            switch admission {
            case .probe:
                state.probing = false
                state.openUntil = .now + openDuration
                return false
            case .closed:
                guard state.openUntil == nil else { return false }
                state.consecutiveFailures += 1
                guard state.consecutiveFailures >= threshold else { return false }
                state.openUntil = .now + openDuration
                state.openings += 1
                return true
            case .refused:
                return false
            }
        }
        if opened {
            onChange(true)
            logger.warning(
                "LMDBCache's Redis tier is failing; circuit open, local tiers serve alone",
                metadata: ["error": "\(error)", "failures": "\(threshold)"])
        }
    }

    /// Whether ``admit()`` would refuse now: open, within its open period or with its probe
    /// under way (a probe can take a command timeout, or a cluster's broad removal seconds).
    var refusesCalls: Bool {
        state.withLockedValue { state in
            guard let until = state.openUntil else { return false }
            return state.probing || ContinuousClock.now < until
        }
    }

    /// Times the circuit opened (a failed probe keeps it open and is not counted again).
    var openings: Int { state.withLockedValue { $0.openings } }
    /// Whether it is open now.
    var isOpen: Bool { state.withLockedValue { $0.openUntil != nil } }
}
#endif
