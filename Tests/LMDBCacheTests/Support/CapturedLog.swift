import Logging

import LMDBCacheStorage

@testable import LMDBCache

/// A `Logger` whose messages a test reads back.
final class CapturedLog: Sendable {
    private struct Entry {
        var level: Logger.Level
        var message: String
        /// The event's metadata and the error attached to it, each key and value as a string.
        var texts: [String]
    }

    private let entries = Locked<[Entry]>([])

    var logger: Logger {
        Logger(label: "test") { _ in Handler(log: self) }
    }

    /// Messages logged at `level` or above.
    func messages(atLeast level: Logger.Level) -> [String] {
        entries.withLock { $0.filter { $0.level >= level }.map(\.message) }
    }

    /// Everything a log handler was given, at any level: each message, each metadata key and
    /// value (nested values one by one), and the description of an attached error.
    func everything() -> [String] {
        entries.withLock { $0.flatMap { [$0.message] + $0.texts } }
    }

    /// The strings inside `value`: the value itself, or each element of an array or dictionary.
    private static func flatten(_ value: Logger.MetadataValue) -> [String] {
        switch value {
        case .string(let string): return [string]
        case .stringConvertible(let convertible): return [convertible.description]
        case .array(let values): return values.flatMap(flatten)
        case .dictionary(let metadata): return metadata.flatMap { [$0.key] + flatten($0.value) }
        }
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
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            var texts = merged.flatMap { [$0.key] + CapturedLog.flatten($0.value) }
            if let error = event.error { texts.append("\(error)") }
            log.entries.withLock { $0.append(Entry(level: event.level, message: "\(event.message)", texts: texts)) }
        }
    }
}
