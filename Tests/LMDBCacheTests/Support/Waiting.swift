import CacheTestSupport
import Foundation
import Logging

@testable import LMDBCache

/// Runs `body` on a thread of its own and waits for it at most `seconds`: its result, or nil when
/// it is still running then (a hang; the thread is left behind, and the test goes on to end what
/// it waits for). A bound on a hang, not a timing threshold: nothing here is expected to be slow.
func outcome<T: Sendable>(within seconds: Double, _ body: @escaping @Sendable () throws -> T) -> Result<T, Error>? {
    let pending = PendingOutcome<T>()
    Thread.detachNewThread { pending.finish(Result { try body() }) }
    return pending.wait(seconds: seconds)
}

/// The result of work running on another thread, once it is there.
final class PendingOutcome<T: Sendable>: Sendable {
    private let result = Locked<Result<T, Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    func finish(_ value: Result<T, Error>) {
        result.withLock { $0 = value }
        done.signal()
    }

    /// The result, waiting for it at most `seconds`; nil while the work still runs.
    func wait(seconds: Double) -> Result<T, Error>? {
        guard done.wait(timeout: .now() + seconds) == .success else { return nil }
        done.signal()  // later waits return at once
        return result.withLock { $0 }
    }
}

/// A logger that signals when a message containing `fragment` is logged.
final class LogSignal: Sendable {
    let fragment: String
    private let seen = DispatchSemaphore(value: 0)

    init(_ fragment: String) { self.fragment = fragment }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(signal: self) }
    }

    /// True once such a message was logged, waiting for it at most `seconds`.
    func wait(seconds: Double) -> Bool {
        seen.wait(timeout: .now() + seconds) == .success
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
/// the pending open with whether it said, within `seconds`, that it waits for another process.
func startWaitingOpen(_ directory: URL, seconds: Double) -> (open: PendingOutcome<DiskCache>, waits: Bool) {
    let waiting = LogSignal("waiting for another process")
    var configuration = DiskCache.Configuration()
    configuration.openTimeout = .seconds(3_600)
    let waitLong = configuration
    let open = PendingOutcome<DiskCache>()
    Thread.detachNewThread {
        open.finish(Result { try DiskCache(directory: directory, configuration: waitLong, logger: waiting.logger) })
    }
    return (open, waiting.wait(seconds: seconds))
}
