// article-service: LMDBCache's get-or-load in front of a deliberately slow backend.
//
//   GET    /articles/:id   the article: from the cache, else from the backend (1 s) and cached
//   DELETE /articles/:id   removes it from the cache (both tiers)
//   POST   /backend/down   the backend fails every load from now on; /backend/up brings it back
//   GET    /stats          the cache's hits and misses per tier, and its loads, as JSON
//
// Environment: HOST (default 127.0.0.1), PORT (default 8080; 0 picks a free one), CACHE_DIR
// (default: the cache named "article-service", in $XDG_CACHE_HOME, else ~/.cache), LOG_LEVEL
// (default info), ARTICLE_TTL (seconds an article is fresh, default 600). SIGTERM or SIGINT
// (Ctrl-C) shuts down gracefully.

import Foundation
import HTTPTypes
import Hummingbird
import LMDBCache
import Logging

let environment = ProcessInfo.processInfo.environment
let logger = {
    var logger = Logger(label: "article-service")
    logger.logLevel = environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
    return logger
}()

/// Logs `message` and exits with status 1: for a service that cannot start or run.
func exitWithError(_ message: String) -> Never {
    logger.critical("\(message)")
    exit(1)
}

let host = environment["HOST"] ?? "127.0.0.1"
guard let port = Int(environment["PORT"] ?? "8080"), (0...65_535).contains(port) else {
    exitWithError("PORT must be a number from 0 to 65535")
}

// Two tiers. Memory: at most 1,000 articles and 16 MiB of encoded JSON, dropping any unread for
// 10 minutes. Disk: at most 256 MiB, dropping any unread for a week, and no growth while the
// volume has less than 128 MiB free.
var configuration = Cache<String, Article>.Configuration(
    memory: .init(countLimit: 1_000, costLimit: 16 << 20, ageLimit: .seconds(600)),
    disk: .init(costLimit: 256 << 20, ageLimit: .seconds(7 * 86_400), freeSpaceLimit: 128 << 20))
// CacheTrimmingService, below, trims both tiers, so their own schedulers stay off.
configuration.memory.automaticTrimming = false
configuration.disk.automaticTrimming = false

let cache: Cache<String, Article>
do {
    if let directory = environment["CACHE_DIR"] {
        cache = try Cache(directory: URL(fileURLWithPath: directory), configuration: configuration, logger: logger)
    } else {
        cache = try Cache(name: "article-service", configuration: configuration, logger: logger)
    }
} catch {
    exitWithError("cannot open the cache: \(error)")
}

guard let ttl = Int(environment["ARTICLE_TTL"] ?? "600"), (1...86_400).contains(ttl) else {
    exitWithError("ARTICLE_TTL must be a number of seconds from 1 to 86400")
}
// An article is fresh for ARTICLE_TTL seconds. A request for one older than half that gets it at
// once while the backend reloads it in the background (refreshAfter); past its expiry it is kept
// an hour more and served when the backend fails (staleIfError) or has not answered within 250 ms
// (timeout); nobody waits more than 5 s (hardTimeout).
let freshness = Freshness(
    refreshAfter: .seconds(ttl) / 2, staleIfError: .seconds(3_600), timeout: .milliseconds(250),
    hardTimeout: .seconds(5))

let backend = SlowBackend(delay: .seconds(1))
let router = Router(context: ArticleRequestContext.self)
router.add(middleware: LogRequestsMiddleware(.debug))

// Get-or-load: the cached article, else the backend's, with the freshness options above.
// Concurrent requests for one id wait on one backend call. The headers say whether this request
// made that call.
router.get("articles/:id") { _, context -> EditedResponse<Article> in
    let id = try articleID(in: context)
    let loader = LoaderRun()
    let article = try await cache.value(forKey: id, expiresAfter: .seconds(ttl), freshness: freshness) {
        loader.mark()
        return try await backend.article(id: id)
    }
    return EditedResponse(
        headers: [.xCache: loader.happened ? "miss" : "hit", .xBackendLoads: "\(await backend.loads)"],
        response: article)
}

router.delete("articles/:id") { _, context -> HTTPResponse.Status in
    cache.removeValue(forKey: try articleID(in: context))
    return .noContent
}

router.post("backend/:state") { _, context -> HTTPResponse.Status in
    switch context.parameters.get("state") {
    case "down": await backend.setUp(false)
    case "up": await backend.setUp(true)
    default: return .notFound
    }
    return .noContent
}

router.get("stats") { _, _ in
    StatsResponse(cache: cache, backendLoads: await backend.loads)
}

let app = Application(
    router: router,
    configuration: .init(address: .hostname(host, port: port)),
    // Trims both tiers while the server runs. At graceful shutdown it flushes queued writes to
    // disk and closes the cache, after the server has stopped: a service group stops its services
    // in reverse order, and the application adds its server after these.
    services: [CacheTrimmingService(cache: cache, logger: logger)],
    onServerRunning: { channel in
        let directory = cache.disk?.directory.path ?? "memory"
        logger.info("Serving articles on http://\(host):\(channel.localAddress?.port ?? port), cache in \(directory)")
    },
    logger: logger)
do {
    try await app.runService()  // until SIGTERM or SIGINT
} catch {
    exitWithError("the service stopped: \(error)")  // the port in use, say
}
