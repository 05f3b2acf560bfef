import Logging

@testable import LMDBCache

/// A `Logger` whose messages a test reads back.
final class CapturedLog: Sendable {
    private let entries = Locked<[(level: Logger.Level, message: String)]>([])

    var logger: Logger {
        Logger(label: "test") { _ in Handler(log: self) }
    }

    /// Messages logged at `level` or above.
    func messages(atLeast level: Logger.Level) -> [String] {
        entries.withLock { $0.filter { $0.level >= level }.map(\.message) }
    }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            log.entries.withLock { $0.append((event.level, "\(event.message)")) }
        }
    }
}
