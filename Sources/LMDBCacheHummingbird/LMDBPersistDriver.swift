#if Hummingbird
import Foundation
import Hummingbird
import LMDBCache
import Logging
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
///   written under a lock per key in this process; two processes creating one key at once may
///   both succeed, the later write winning);
/// - `set` with `expires: nil` keeps the expiry the key already has;
/// - `get` of a value stored as another type throws `PersistError.invalidConversion`;
/// - `getWithTTL` returns the time the value has left, nil when it never expires.
///
/// As a `Service`, ``run()`` waits for graceful shutdown, then flushes and closes the store.
public final class LMDBPersistDriver: PersistDriver {
    /// The disk tier the values live in (limits, statistics, `flush()`).
    public let disk: DiskCache
    private let locks = KeyLocks()

    /// Opens (creating when missing, owner-only) the store in `directory`.
    ///
    /// - Parameter configuration: the disk tier's limits and durability; default: no limits,
    ///   batched durability.
    /// - Throws: what `DiskCache.init(directory:configuration:logger:)` throws.
    public init(
        directory: URL, configuration: DiskCache.Configuration = .init(),
        logger: Logger = Logger(label: "LMDBCache", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws {
        disk = try DiskCache(directory: directory, configuration: configuration, logger: logger)
    }

    public func create<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let bytes = try Self.encode(value)
        try locks.withLock(for: key) {
            if try disk.containsData(forKey: key) { throw PersistError.duplicate }
            try disk.setData(bytes, forKey: key, expiresAfter: expires)
        }
    }

    public func set<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let bytes = try Self.encode(value)
        try locks.withLock(for: key) {
            if let expires {
                try disk.setData(bytes, forKey: key, expiresAfter: expires)
            } else if let kept = try disk.valueAndExpiry(forKey: key.cacheKeyBytes)?.expires, kept != 0 {
                try disk.setData(bytes, forKey: key.cacheKeyBytes, expiringAt: kept)
            } else {
                try disk.setData(bytes, forKey: key)
            }
        }
    }

    public func get<Object: Codable & Sendable>(key: String, as object: Object.Type) async throws -> Object? {
        guard let bytes = try disk.data(forKey: key) else { return nil }
        return try Self.decode(bytes, as: object)
    }

    public func getWithTTL<Object: Codable & Sendable>(key: String, as object: Object.Type) async throws
        -> (object: Object, ttl: Duration?)?
    {
        guard let (bytes, expires) = try disk.valueAndExpiry(forKey: key.cacheKeyBytes) else { return nil }
        let now = disk.nowMilliseconds
        let ttl: Duration? =
            expires == 0 ? nil : .milliseconds(Int64(clamping: expires > now ? expires - now : 0))
        return (try Self.decode(bytes, as: object), ttl)
    }

    public func remove(key: String) async throws {
        try disk.removeData(forKey: key)
    }

    /// Flushes every write and closes the store; later calls throw `CacheError.closed`.
    public func shutdown() async throws {
        defer { disk.close() }
        try disk.flush()
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

/// Striped locks by key, so `create`'s check and write are one step for other callers in this
/// process.
private final class KeyLocks: Sendable {
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
