import Foundation

/// What the service serves and the cache stores (as JSON, LMDBCache's codec for `Codable` values).
struct Article: Codable, Sendable {
    var id: String
    var title: String
    var body: String
    /// When the backend produced this copy: the same time on every cached response.
    var loadedAt: Date
}

/// Stands in for a slow origin, such as a database or another service: every load takes
/// `delay` and is counted, so the cache's effect shows in the timings and in ``loads``.
actor SlowBackend {
    /// Loads served since the process started.
    private(set) var loads = 0
    private let delay: Duration

    init(delay: Duration = .seconds(1)) {
        self.delay = delay
    }

    /// The article called `id`, after `delay`. Any id exists.
    func article(id: String) async throws -> Article {
        loads += 1
        try await Task.sleep(for: delay)
        return Article(
            id: id, title: "Article \(id)", body: "The text of article \(id), fetched the slow way.", loadedAt: .now)
    }
}
