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
    /// The backend is down (`POST /backend/down`): every load fails at once.
    struct Unavailable: Error {}

    /// Loads asked of it since the process started (failed ones included).
    private(set) var loads = 0
    /// False while the backend is down.
    private(set) var isUp = true
    private let delay: Duration

    init(delay: Duration = .seconds(1)) {
        self.delay = delay
    }

    /// Takes the backend down or brings it back.
    func setUp(_ up: Bool) {
        isUp = up
    }

    /// The article called `id`, after `delay`. Any id exists. Throws ``Unavailable`` while down.
    func article(id: String) async throws -> Article {
        loads += 1
        guard isUp else { throw Unavailable() }
        try await Task.sleep(for: delay)
        return Article(
            id: id, title: "Article \(id)", body: "The text of article \(id), fetched the slow way.", loadedAt: .now)
    }
}
