#if Redis
import CacheTestSupport
import Logging
import Testing

@testable import LMDBCacheRedis

/// The breaker's states as the writer reads them: it waits while ``CircuitBreaker/refusesCalls``
/// (a write tried then is not tried at all, and was retried every 10 ms, one by one, for as long
/// as a broad removal held the probe).
@Suite("Redis circuit breaker")
struct CircuitBreakerTests {
    /// The next admission that is not refused, waiting for the open period to end.
    static func nextProbe(_ breaker: CircuitBreaker) async -> CircuitBreaker.Admission {
        let deadline = ContinuousClock.now + hangBound
        var admission = breaker.admit()
        while admission == .refused, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(1))
            admission = breaker.admit()
        }
        return admission
    }

    @Test("An open circuit refuses calls during its open period and while its probe is under way, and not once it closes")
    func refusesWhileProbing() async {
        let breaker = CircuitBreaker(threshold: 2, openDuration: .milliseconds(20), logger: Logger(label: "test"))
        #expect(!breaker.refusesCalls)
        breaker.failed(breaker.admit(), CancellationError())
        #expect(!breaker.refusesCalls, "one failure of two")
        breaker.failed(breaker.admit(), CancellationError())
        #expect(breaker.isOpen && breaker.openings == 1)

        let probe = await Self.nextProbe(breaker)
        #expect(probe == .probe)
        #expect(breaker.refusesCalls, "the probe is under way")
        #expect(breaker.admit() == .refused)
        breaker.failed(probe, CancellationError())
        #expect(breaker.isOpen && breaker.openings == 1, "a failed probe keeps it open, not counted again")

        let second = await Self.nextProbe(breaker)
        #expect(second == .probe)
        breaker.succeeded(second)
        #expect(!breaker.isOpen && !breaker.refusesCalls)
        #expect(breaker.admit() == .closed)
    }
}
#endif
