#if Redis
import Foundation
import Synchronization

/// A task executor on its own serial dispatch queue, outside Swift's cooperative pool: a task
/// preferring it (`withTaskExecutorPreference`) keeps running while every cooperative thread is
/// blocked.
final class OwnQueueTaskExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "lmdbcache.tests.own-queue-executor")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// Keeps every thread of Swift's cooperative pool blocked until ``release()``, as a process whose
/// threads are all busy (or blocked by some other code) does: a job enqueued on the pool meanwhile
/// does not run.
///
/// Occupies as many threads as the machine has active processors (the pool's width on Linux).
final class BusyCooperativePool: Sendable {
    private let width = ProcessInfo.processInfo.activeProcessorCount
    private let started = Mutex(0)
    private let gate = DispatchSemaphore(value: 0)

    /// Starts the blocking jobs; ``waitUntilBusy()`` tells when they all run.
    init() {
        for _ in 0..<width {
            Task.detached {
                self.started.withLock { $0 += 1 }
                Self.block(self.gate)
            }
        }
    }

    private static func block(_ gate: DispatchSemaphore) { gate.wait() }

    /// Waits on the calling thread (which must not be one of the pool's: run it on an
    /// ``OwnQueueTaskExecutor``) until every blocking job runs; whether they all do (false only
    /// after ``hangBound``: a hang).
    func waitUntilBusy() -> Bool {
        let end = ContinuousClock.now + hangBound
        while ContinuousClock.now < end {
            if started.withLock({ $0 }) == width { return true }
            usleep(1_000)
        }
        return false
    }

    /// Lets the blocked threads go.
    func release() {
        for _ in 0..<width { gate.signal() }
    }
}
#endif
