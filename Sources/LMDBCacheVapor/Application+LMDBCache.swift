#if Vapor
    import Foundation
    import LMDBCache
    import Vapor

    extension Application.Caches.Provider {
        /// An LMDBCache disk store in `directory` as the application's cache.
        ///
        /// ```swift
        /// app.caches.use(.lmdb(directory: URL(fileURLWithPath: "/var/cache/myapp")))
        /// app.caches.use(.lmdb(
        ///     directory: URL(fileURLWithPath: "/var/cache/myapp"),
        ///     configuration: .init(countLimit: 100_000, costLimit: 1 << 30),
        ///     coder: .propertyList))
        /// ```
        ///
        /// The store is opened (created when missing, owner-only) when this provider is used, and is
        /// flushed and closed when the application shuts down. If it cannot be opened, the error is
        /// logged, the application's boot throws it, and every cache call fails with it.
        ///
        /// - Parameters:
        ///   - directory: the store's directory; other processes may open it at the same time.
        ///   - configuration: the disk tier's limits, durability and clock; default: no limits,
        ///     batched durability (a write returns once queued; ``LMDBCache/DiskCache/flush()`` waits for it).
        ///   - coder: how values are stored; default ``LMDBVaporCache/Coder/json``.
        public static func lmdb(
            directory: URL, configuration: DiskCache.Configuration = .init(), coder: LMDBVaporCache.Coder = .json
        ) -> Self {
            .init { application in
                let store: LMDBVaporCache.Store
                do {
                    store = .open(
                        try DiskCache(directory: directory, configuration: configuration, logger: application.logger))
                } catch {
                    application.logger.error(
                        "LMDBCache: the cache store could not be opened",
                        metadata: [
                            "directory": "\(LoggedText.render(directory.path))", "error": "\(LoggedText.error(error))",
                        ])
                    store = .failed(error)
                }
                application.lifecycle.use(LMDBCacheLifecycle(store: store))
                application.caches.use { application in
                    LMDBVaporCache(
                        store: store, coder: coder, threadPool: application.threadPool,
                        on: application.eventLoopGroup.next(), logger: application.logger)
                }
            }
        }
    }

    /// Fails the application's boot when the store did not open; flushes and closes it on shutdown.
    struct LMDBCacheLifecycle: LifecycleHandler {
        let store: LMDBVaporCache.Store

        func willBoot(_ application: Application) throws {
            if case .failed(let error) = store { throw error }
        }

        func shutdown(_ application: Application) {
            // Flushes first; a write that fails there is logged.
            if case .open(let disk) = store { disk.close() }
        }
    }
#endif
