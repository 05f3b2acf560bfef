#if Vapor
import Foundation
import LMDBCache
import LMDBCacheStorage
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
    /// The store is opened (created when missing, owner-only) when this provider is used. At shutdown
    /// it is flushed, and it closes once the requests still running have finished. If it cannot be
    /// opened, the error is logged, the application's boot throws it (unless another cache has
    /// replaced this one by then), and every call of this cache fails with it.
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
            let store: Store
            do {
                let disk = try DiskCache(directory: directory, configuration: configuration, logger: application.logger)
                store = Store(.success(disk), closesWhenReleased: true)
            } catch {
                application.logger.error(
                    "LMDBCache: the cache store could not be opened",
                    metadata: [
                        "directory": "\(LoggedText.render(directory.path))", "error": "\(LoggedText.error(error))",
                    ])
                store = Store(.failure(error), closesWhenReleased: true)
            }
            application.lifecycle.use(LMDBCacheLifecycle(store: WeakStore(store)))
            application.caches.use { application in
                LMDBVaporCache(
                    store: store, coder: coder, threadPool: application.threadPool,
                    on: application.eventLoopGroup.next(), logger: application.logger)
            }
        }
    }
}

/// Fails the application's boot when its cache is a store that did not open; flushes the store
/// at shutdown. It holds the store weakly: the application's cache factory and the calls under
/// way keep it open, so it closes after the last request that uses it, once the application has
/// let go of the factory.
struct LMDBCacheLifecycle: LifecycleHandler {
    let store: WeakStore

    func willBoot(_ application: Application) throws {
        // Only if this store is still the application's cache: a provider used later replaces it.
        guard let store = store.value, (application.cache as? LMDBVaporCache)?.store === store,
            case .failure(let error) = store.opened
        else { return }
        throw error
    }

    func shutdownAsync(_ application: Application) async {
        guard let store = store.value, case .success(let disk) = store.opened else { return }
        do {
            try await application.threadPool.runIfActive { try disk.flush() }
        } catch CacheError.closed {
            return
        } catch {
            application.logger.error(
                "LMDBCache: a write failed before shutdown", metadata: ["error": "\(LoggedText.error(error))"])
        }
    }
}

/// A store referenced without keeping it open.
struct WeakStore: Sendable {
    private let box: Box
    var value: Store? { box.value }

    init(_ store: Store) { box = Box(store) }

    private final class Box: Sendable {
        nonisolated(unsafe) weak var value: Store?
        init(_ value: Store) { self.value = value }
    }
}
#endif
