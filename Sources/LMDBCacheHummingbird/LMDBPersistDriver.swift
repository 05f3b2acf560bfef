#if Hummingbird
import Foundation
import Hummingbird
import LMDBCache
import Logging
import NIOPosix
import ServiceLifecycle

/// Hummingbird's key-value persistence (`PersistDriver`) on an LMDBCache disk tier: bounded,
/// persistent across restarts, and shared by every process that opens the same directory.
///
/// ```swift
/// let persist = try LMDBPersistDriver(directory: URL(fileURLWithPath: "/var/cache/myapp"))
/// try await persist.set(key: "k", value: "v", expires: .seconds(300))
/// let app = Application(router: router, services: [persist])   // closed on graceful shutdown
/// ```
///
/// Values are stored as JSON. The semantics are `PersistDriver`'s:
/// - `create` throws `PersistError.duplicate` when the key holds a live value (checked and
///   written under a lock per key shared by every driver in this process; two processes creating
///   one key at once may both succeed, the later write winning);
/// - `set` with `expires: nil` keeps the expiry the key already has (within this process; a
///   concurrent writer in another process may see its expiry replaced);
/// - `get` of a value that does not decode as the type asked for throws
///   `PersistError.invalidConversion`. JSON does not record types, so a value that decodes as
///   another type too (an integer read as a `Double`, any object read as a struct whose
///   properties are all optional) is returned as that type;
/// - `getWithTTL` returns the time the value has left, nil when it never expires;
/// - the empty key holds nothing: `get` returns nil, `remove` does nothing, `set` and `create`
///   throw `CacheError.invalidKey`.
///
/// Every disk call runs on NIO's shared thread pool, never on Swift's cooperative threads: a
/// write in ``DiskCache/Durability/synchronous`` mode, or one waiting for another process's write
/// transaction, does not hold up other tasks.
///
/// As a `Service`, ``run()`` waits for graceful shutdown, then flushes and closes the store.
public final class LMDBPersistDriver: PersistDriver {
    /// The disk tier the values live in (limits, statistics, `flush()`).
    public let disk: DiskCache

    /// Opens (creating when missing, owner-only) the store in `directory`.
    ///
    /// - Parameter configuration: the disk tier's limits and durability; default: no limits,
    ///   batched durability.
    /// - Throws: what `DiskCache.init(directory:configuration:logger:)` throws.
    public init(
        directory: URL, configuration: DiskCache.Configuration = .init(),
        logger: Logger = .lmdbCacheDefault
    ) throws {
        disk = try DiskCache(directory: directory, configuration: configuration, logger: logger)
    }

    public func create<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        try await offload { [disk] in
            let bytes = try Self.encode(value)
            try KeyLocks.shared.withLock(for: key) {
                if try disk.containsData(forKey: key) { throw PersistError.duplicate }
                try disk.setData(bytes, forKey: key, expiresAfter: expires)
            }
        }
    }

    public func set<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        try await offload { [disk] in
            let bytes = try Self.encode(value)
            try KeyLocks.shared.withLock(for: key) {
                if let expires {
                    try disk.setData(bytes, forKey: key, expiresAfter: expires)
                } else if !key.isEmpty, let kept = try disk.valueAndExpiry(forKey: key.cacheKeyBytes)?.expires,
                    kept != 0
                {
                    try disk.setData(bytes, forKey: key.cacheKeyBytes, expiringAt: kept)
                } else {
                    try disk.setData(bytes, forKey: key)
                }
            }
        }
    }

    public func get<Object: Codable & Sendable>(key: String, as object: Object.Type) async throws -> Object? {
        if key.isEmpty { return nil }
        return try await offload { [disk] in
            guard let bytes = try disk.data(forKey: key) else { return nil }
            return try Self.decode(bytes, as: object)
        }
    }

    public func getWithTTL<Object: Codable & Sendable>(key: String, as object: Object.Type) async throws
        -> (object: Object, ttl: Duration?)?
    {
        if key.isEmpty { return nil }
        return try await offload { [disk] in
            guard let (bytes, expires) = try disk.valueAndExpiry(forKey: key.cacheKeyBytes) else { return nil }
            let now = disk.nowMilliseconds
            let ttl: Duration? =
                expires == 0 ? nil : .milliseconds(Int64(clamping: expires > now ? expires - now : 0))
            return (try Self.decode(bytes, as: object), ttl)
        }
    }

    public func remove(key: String) async throws {
        if key.isEmpty { return }
        try await offload { [disk] in
            // Under the key's lock: a `set` without expiry never gives the value it writes the
            // expiry of a value removed in between.
            try KeyLocks.shared.withLock(for: key) { try disk.removeData(forKey: key) }
        }
    }

    /// Flushes every write and closes the store; later calls throw `CacheError.closed`. A second
    /// call (say `run()` ended by graceful shutdown, then an explicit call) does nothing.
    public func shutdown() async throws {
        try await offload { [disk] in
            defer { disk.close() }
            do {
                try disk.flush()
            } catch CacheError.closed {
                return
            }
        }
    }

    /// Runs `body` on NIO's shared thread pool.
    private func offload<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(body)
    }

    private static func encode(_ value: some Encodable) throws -> [UInt8] {
        Array(try JSONEncoder().encode(value))
    }

    private static func decode<Object: Decodable>(_ bytes: [UInt8], as object: Object.Type) throws -> Object {
        do {
            return try JSONDecoder().decode(object, from: Data(bytes))
        } catch {
            throw PersistError.invalidConversion
        }
    }
}

/// Striped locks by key, so `create`'s check and write, and `set`'s read of the expiry it keeps
/// and its write, are one step for every other driver in this process (two drivers may share a
/// directory's store).
private final class KeyLocks: Sendable {
    static let shared = KeyLocks()

    private let stripes = (0..<64).map { _ in NSLock() }

    func withLock<T>(for key: String, _ body: () throws -> T) throws -> T {
        var hasher = Hasher()
        hasher.combine(key)
        let stripe = stripes[Int(UInt(bitPattern: hasher.finalize()) % UInt(stripes.count))]
        stripe.lock()
        defer { stripe.unlock() }
        return try body()
    }
}
#endif
