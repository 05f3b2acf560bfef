import CacheTestSupport
import Foundation
import Logging
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// How long a test waits for something expected (a thread's result, a log line, a condition)
/// before it reports a hang. Generous on purpose: only a hang reaches it, never a busy machine.
/// No test's verdict depends on how long anything took.
let hangBound: Duration = .seconds(300)

/// Records that `what` did not happen within ``hangBound``: a hang, never a verdict on timing.
func recordHang(_ what: String, sourceLocation: SourceLocation) {
    Issue.record("hung: \(what) did not happen within \(hangBound)", sourceLocation: sourceLocation)
}

/// Runs `body` on a thread of its own and waits for it: its result, or nil (recorded as a hang
/// of `what`) when it is still running after ``hangBound``; the thread is then left behind, and
/// the test goes on to end what it waits for.
func outcome<T: Sendable>(
    _ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: @escaping @Sendable () throws -> T
) -> Result<T, Error>? {
    let pending = PendingOutcome<T>()
    Thread.detachNewThread { pending.finish(Result { try body() }) }
    return pending.wait(what, sourceLocation: sourceLocation)
}

/// The result of work running on another thread, once it is there.
final class PendingOutcome<T: Sendable>: Sendable {
    private let result = Locked<Result<T, Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    func finish(_ value: Result<T, Error>) {
        result.withLock { $0 = value }
        done.signal()
    }

    /// The result, waiting for it; nil (recorded as a hang of `what`) when the work still runs
    /// after ``hangBound``.
    func wait(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) -> Result<T, Error>? {
        guard done.wait(timeout: .now() + hangBound.timeInterval) == .success else {
            recordHang(what, sourceLocation: sourceLocation)
            return nil
        }
        done.signal()  // later waits return at once
        return result.withLock { $0 }
    }

    /// The result if the work has finished, without waiting.
    var finished: Result<T, Error>? { result.withLock { $0 } }
}

/// A logger that signals when a message containing `fragment` is logged.
final class LogSignal: Sendable {
    let fragment: String
    private let seen = DispatchSemaphore(value: 0)

    init(_ fragment: String) { self.fragment = fragment }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(signal: self) }
    }

    /// Waits until such a message is logged; false (recorded as a hang of `what`) when none was
    /// after ``hangBound``.
    @discardableResult
    func wait(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        guard seen.wait(timeout: .now() + hangBound.timeInterval) == .success else {
            recordHang(what, sourceLocation: sourceLocation)
            return false
        }
        return true
    }

    private struct Handler: LogHandler {
        let signal: LogSignal
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            if "\(event.message)".contains(signal.fragment) { signal.seen.signal() }
        }
    }
}

/// Another process holding a store's presence lock exclusively, as a compaction or repair does
/// (`cache-test-helper hold-exclusive`), until ``release()`` or the end of the test.
final class ExclusiveHold {
    private let holder: HelperProcess
    private var released = false

    /// Starts the holder and returns once it holds the lock.
    init(_ directory: URL) throws {
        holder = try HelperProcess(["hold-exclusive", directory.path])
        guard holder.readLine() == "exclusive" else {
            holder.kill()
            throw CacheError.storeInUse(path: directory.path, operation: "hold (the holder did not start)")
        }
    }

    /// Ends the hold (the holder is killed; the kernel drops its lock).
    func release() {
        guard !released else { return }
        released = true
        holder.kill()
        _ = holder.wait()
    }

    deinit { release() }
}

/// Starts opening `directory` on a thread of its own with an hour's `openTimeout`, and returns
/// the pending open once it said that it waits for another process (`waits`: false when it did
/// not say so within ``hangBound``, recorded as a hang).
func startWaitingOpen(
    _ directory: URL, sourceLocation: SourceLocation = #_sourceLocation
) -> (open: PendingOutcome<DiskCache>, waits: Bool) {
    let waiting = LogSignal("waiting for another process")
    var configuration = DiskCache.Configuration()
    configuration.openTimeout = .seconds(3_600)
    let waitLong = configuration
    let open = PendingOutcome<DiskCache>()
    Thread.detachNewThread {
        open.finish(Result { try DiskCache(directory: directory, configuration: waitLong, logger: waiting.logger) })
    }
    return (open, waiting.wait("the open said it waits for another process", sourceLocation: sourceLocation))
}
