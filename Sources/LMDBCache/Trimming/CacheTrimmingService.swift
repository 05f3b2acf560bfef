import Logging
import ServiceLifecycle

/// Runs a ``Cache``'s trimming as a swift-service-lifecycle `Service`, for applications that run
/// their services in a `ServiceGroup`.
///
/// `run()` trims the memory tier every ``MemoryCache/Configuration/autoTrimInterval`` and the disk
/// tier every ``DiskCache/Configuration/autoTrimInterval`` until graceful shutdown (or
/// cancellation), then flushes and closes the cache. Open the cache with `automaticTrimming` set to
/// false in both tiers' configurations, so that the tiers' own schedulers do not trim as well.
///
/// ```swift
/// var configuration = Cache<String, Article>.Configuration()
/// configuration.memory.automaticTrimming = false
/// configuration.disk.automaticTrimming = false
/// let cache = try Cache<String, Article>(name: "articles", configuration: configuration)
/// let group = ServiceGroup(services: [CacheTrimmingService(cache: cache), server], logger: logger)
/// try await group.run()
/// ```
public struct CacheTrimmingService<Key: CacheKey, Value: Sendable>: Service {
    private let cache: Cache<Key, Value>
    private let logger: Logger
    /// Called after each pass with its tier (for tests, which wait on passes instead of time).
    var passCompleted: @Sendable (CacheTier) -> Void = { _ in }

    /// A service that trims `cache`, then flushes and closes it at graceful shutdown.
    public init(
        cache: Cache<Key, Value>,
        logger: Logger = .lmdbCacheDefault
    ) {
        self.cache = cache
        self.logger = logger
    }

    /// Trims until graceful shutdown or cancellation, then flushes and closes the cache.
    ///
    /// - Throws: the flush's error, after closing the cache.
    public func run() async throws {
        let cache = cache
        let logger = logger
        let passCompleted = passCompleted
        _ = await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                let memory = TrimPassRecorder(tier: .memory, logger: logger)
                group.addTask {
                    await Self.repeatEvery(cache.configuration.memory.autoTrimInterval) {
                        memory.run { cache.memory.trimPass() }
                        passCompleted(.memory)
                    }
                }
                if let disk = cache.disk {
                    let pass = TrimPassRecorder(tier: .disk, logger: logger)
                    group.addTask {
                        await Self.repeatEvery(disk.configuration.autoTrimInterval) {
                            pass.run { disk.trimPass() }
                            passCompleted(.disk)
                        }
                    }
                }
            }
        }
        defer { cache.close() }
        try cache.flush()
    }

    /// Calls `body` every `interval` until the task is cancelled.
    private static func repeatEvery(_ interval: Duration, _ body: () -> Void) async {
        let interval = TrimScheduler.effectiveInterval(interval)
        while true {
            do { try await Task.sleep(for: interval) } catch { return }
            body()
        }
    }
}
