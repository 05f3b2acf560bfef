import Foundation
import HTTPTypes
import Hummingbird
import LMDBCache
import Synchronization

extension Article: ResponseEncodable {}

/// Hummingbird's basic request context, with JSON responses made for reading in a terminal.
struct ArticleRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    var responseEncoder: ReadableJSONEncoder { ReadableJSONEncoder() }
}

/// JSON with sorted keys, indented, and ending in a newline, so curl's output reads well.
struct ReadableJSONEncoder: ResponseEncoder {
    func encode(_ value: some Encodable, from request: Request, context: some RequestContext) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        var json = try encoder.encode(value)
        json.append(UInt8(ascii: "\n"))
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: json)))
    }
}

extension HTTPField.Name {
    /// `miss` when this request called the backend (its loader ran); `hit` when it did not: the
    /// cache held the article, or another request's load of it was under way.
    static let xCache = Self("X-Cache")!
    /// How many times the backend has been called since the service started.
    static let xBackendLoads = Self("X-Backend-Loads")!
}

/// Records whether a get-or-load ran its loader, that is whether this request called the
/// backend. (A request that waited on another request's load of the same id did not.)
final class LoaderRun: Sendable {
    private let ran = Mutex(false)

    /// Called by the loader.
    func mark() { ran.withLock { $0 = true } }

    /// Whether ``mark()`` was called.
    var happened: Bool { ran.withLock { $0 } }
}

/// The article id in the request's path: 1 to 64 ASCII letters, digits, `-` or `_`.
///
/// - Throws: `HTTPError(.badRequest)` with a message saying so.
func articleID(in context: some RequestContext) throws -> String {
    let id = try context.parameters.require("id")
    let allowed = id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
    guard (1...64).contains(id.utf8.count), allowed else {
        throw HTTPError(.badRequest, message: "an article id is 1 to 64 ASCII letters, digits, '-' or '_'")
    }
    return id
}

/// `GET /stats`: the cache's counters since the service started, and the backend's.
struct StatsResponse: ResponseEncodable {
    struct Tier: Codable {
        var hits: Int
        var misses: Int
        /// Entries the tier holds now.
        var entries: Int
        /// Entries that left the tier, by reason (`explicit`, `expired`, `count`, `cost`, ...);
        /// absent while there are none.
        var removals: [String: Int]?

        init(_ statistics: TierStatistics, entries: Int) {
            hits = statistics.hits
            misses = statistics.misses
            self.entries = entries
            removals =
                statistics.removals.isEmpty
                ? nil : Dictionary(uniqueKeysWithValues: statistics.removals.map { ($0.key.rawValue, $0.value) })
        }
    }

    var memory: Tier
    var disk: Tier
    /// Loader runs: get-or-load misses, concurrent misses for one key counted once.
    var loads: Int
    var loadFailures: Int
    var failedWrites: Int
    /// Calls the backend served (the same as `loads` here, as nothing else calls it).
    var backendLoads: Int
    /// Background reloads of articles older than half their lifetime, and those that failed.
    var refreshes: Int
    var refreshFailures: Int
    /// Expired articles served because the backend failed, or was slower than the timeout.
    var staleServedOnError: Int
    var staleServedOnTimeout: Int
    /// Requests that waited the hard timeout with nothing to serve.
    var loadTimeouts: Int

    init(cache: Cache<String, Article>, backendLoads: Int) {
        let statistics = cache.statistics
        memory = Tier(statistics.memory, entries: cache.memory.totalCount)
        disk = Tier(statistics.disk, entries: cache.disk?.totalCount ?? 0)
        loads = statistics.loads
        loadFailures = statistics.loadFailures
        failedWrites = statistics.failedWrites
        self.backendLoads = backendLoads
        refreshes = statistics.refreshes
        refreshFailures = statistics.refreshFailures
        staleServedOnError = statistics.staleServedOnError
        staleServedOnTimeout = statistics.staleServedOnTimeout
        loadTimeouts = statistics.loadTimeouts
    }
}
