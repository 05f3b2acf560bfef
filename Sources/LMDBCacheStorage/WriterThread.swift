import Dispatch
import Foundation
import Glibc

/// The one thread that runs an environment's write transactions.
///
/// LMDB allows one write transaction at a time per environment, and a write transaction must stay
/// on the thread that began it. Funnelling all of them through one thread makes both hold by
/// construction, and lets callers return as soon as their work is queued. A caller that must wait
/// for its job anyway may run it on its own thread while the writer is idle
/// (``runHereIfIdle(_:)``), saving the two thread hand-offs: LMDB's rule holds, since the writer
/// thread runs nothing meanwhile and the job begins and ends its transactions on one thread.
package final class WriterThread: @unchecked Sendable {
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var jobs: [() -> Void] = []
    private var stopping = false
    private var threadID: pthread_t?
    /// True while the writer thread runs jobs.
    private var busy = false
    /// The caller's thread running a job in the writer's place, if any.
    private var standIn: pthread_t?
    private let finished = DispatchSemaphore(value: 0)

    package init(name: String) {
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            Self.nameKernelThread(name)
            condition.lock()
            threadID = pthread_self()
            condition.unlock()
            started.signal()
            run()
        }
        thread.name = name
        thread.start()
        started.wait()
    }

    /// Gives the calling thread `name` (its first 15 bytes) as the kernel sees it: what `top -H`,
    /// `/proc/<pid>/task/*/comm` and debuggers show. Foundation's `Thread.name` does not reach
    /// the kernel on Linux, and `pthread_setname_np` is not visible to Swift, so the name is
    /// written to `/proc/thread-self/comm`. Best effort: a failure leaves the thread unnamed.
    private static func nameKernelThread(_ name: String) {
        let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    /// True on the writer thread itself.
    package var isCurrent: Bool {
        condition.lock()
        defer { condition.unlock() }
        let me = pthread_self()
        return (threadID.map { pthread_equal($0, me) != 0 } ?? false)
            || (standIn.map { pthread_equal($0, me) != 0 } ?? false)
    }

    /// Runs `job` on the calling thread in the writer's place when the writer is idle (nothing
    /// queued, nothing running, not stopped) and returns its result; nil, without running it,
    /// otherwise. Jobs queued meanwhile wait until it returns. On the writer thread (or inside
    /// such a job) it just runs `job`.
    package func runHereIfIdle<T>(_ job: () throws -> T) rethrows -> T? {
        if isCurrent { return try job() }
        condition.lock()
        guard jobs.isEmpty, !busy, standIn == nil, !stopping else {
            condition.unlock()
            return nil
        }
        standIn = pthread_self()
        condition.unlock()
        defer {
            condition.lock()
            standIn = nil
            // Only the writer waits on `condition`; with nothing queued meanwhile it would wake
            // just to wait again.
            if !jobs.isEmpty || stopping { condition.signal() }
            condition.unlock()
        }
        return try job()
    }

    /// Queues `job`; it runs after every job queued before it. Returns false once stopped.
    @discardableResult
    package func async(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if stopping { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Runs `job` on the writer thread and waits for its result.
    package func sync<T>(_ job: () throws -> T) throws -> T {
        if isCurrent { return try job() }
        return try withoutActuallyEscaping(job) { job in
            // The queued closure reaches `job` through this box and empties it before signalling,
            // so `job` has not escaped by the time `withoutActuallyEscaping` returns.
            var result: Result<T, any Error>?
            let box = JobBox()
            box.run = { result = Result { try job() } }
            let done = DispatchSemaphore(value: 0)
            condition.lock()
            if stopping {
                condition.unlock()
                throw StorageError.closed
            }
            jobs.append {
                box.run?()
                box.run = nil
                done.signal()
            }
            condition.signal()
            condition.unlock()
            done.wait()
            return try result!.get()
        }
    }

    /// Runs the jobs already queued, then ends the thread; later jobs are refused.
    package func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
        finished.wait()
    }

    private func run() {
        while true {
            condition.lock()
            busy = false
            while (jobs.isEmpty && !stopping) || standIn != nil { condition.wait() }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            let done = stopping && batch.isEmpty
            busy = !done
            condition.unlock()
            if done { break }
            for job in batch { job() }
        }
        finished.signal()
    }
}

private final class JobBox: @unchecked Sendable {
    var run: (() -> Void)?
}
