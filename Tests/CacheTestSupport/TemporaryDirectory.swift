import Foundation

/// A fresh directory under the system's temporary directory, removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(_ label: String = #function) {
        let name = label.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("lmdbcache-tests-\(name)-\(UUID().uuidString)")
    }

    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}
