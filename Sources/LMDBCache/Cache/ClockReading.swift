/// The time elapsed on a clock the cache was given as an existential (``Cache/Configuration/timeoutClock``)
/// since the reading began: what a load's age is measured on.
struct ClockReading: Sendable {
    private let clock: any Clock<Duration>
    private let start: any InstantProtocol<Duration> & Sendable

    init(_ clock: any Clock<Duration>) {
        func now<C: Clock<Duration>>(_ clock: C) -> any InstantProtocol<Duration> & Sendable { clock.now }
        self.clock = clock
        start = now(clock)
    }

    /// The time since the reading began (zero if the clock went back).
    var elapsed: Duration {
        func elapsed<C: Clock<Duration>>(_ clock: C) -> Duration {
            guard let start = start as? C.Instant else { return .zero }
            return max(.zero, start.duration(to: clock.now))
        }
        return elapsed(clock)
    }
}
