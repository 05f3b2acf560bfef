#if Vapor
import Foundation
import LMDBCache
import LMDBCacheStorage
import Logging
import NIOCore
import NIOPosix
import Vapor

/// Vapor's `Cache` on an LMDBCache disk tier: bounded, persistent across restarts, and shared by
/// every process that opens the same directory.
///
/// Register it the Vapor way; the store is opened at once, flushed when the application shuts
/// down, and closed once the last request using it has finished:
///
/// ```swift
/// app.caches.use(.lmdb(directory: URL(fileURLWithPath: "/var/cache/myapp")))
/// try await app.cache.set("k", to: "v", expiresIn: .minutes(5))
/// let v: String? = try await app.cache.get("k")
/// ```
///
/// The semantics are `Cache`'s: `set` replaces (a nil value removes), `expiresIn` is counted
/// from the write on the cache's clock (zero or negative: the key is removed), and `get` returns
/// nil for a missing or expired key. A stored value that does not decode as the type asked for
/// (stored as another type, say) is a miss, logged at info level, and stays stored, as Vapor's
/// `MemoryCache` returns nil for it. The empty key holds nothing: `get` returns nil, `delete`
/// does nothing, `set` fails with ``LMDBCache/CacheError/invalidKey(reason:)``.
///
/// Reads, writes, encoding and decoding run on the application's thread pool, never on an event
/// loop: a large value, or a write in ``LMDBCache/DiskCache/Durability/synchronous`` mode, does
/// not hold up other requests. Once the pool has stopped (the application shut down), calls fail
/// with ``LMDBCache/CacheError/closed``.
public struct LMDBVaporCache: Vapor.Cache, Sendable {
    /// How values become bytes on disk and back.
    public struct Coder: Sendable {
        let encode: @Sendable (any Encodable) throws -> [UInt8]
        let decode: @Sendable (any Decodable.Type, [UInt8]) throws -> any Decodable

        /// A coder from two functions: `encode` turns a value into bytes, `decode` bytes into a
        /// value of the type given (or throws).
        public init(
            encode: @escaping @Sendable (any Encodable) throws -> [UInt8],
            decode: @escaping @Sendable (any Decodable.Type, [UInt8]) throws -> any Decodable
        ) {
            self.encode = encode
            self.decode = decode
        }

        /// JSON, with Foundation's default encoder and decoder settings (the default).
        public static var json: Coder {
            Coder(
                encode: { Array(try JSONEncoder().encode($0)) },
                decode: { type, bytes in try JSONDecoder().decode(type, from: Data(bytes)) })
        }

        /// Binary property lists: smaller and faster to decode than JSON for numbers and dates.
        /// Each value is stored inside a one-element array, as a property list cannot hold a lone
        /// string or number at its top level.
        public static var propertyList: Coder {
            Coder(
                encode: { value in
                    let encoder = PropertyListEncoder()
                    encoder.outputFormat = .binary
                    return Array(try encodeWrapped(value, with: encoder))
                },
                decode: { type, bytes in try decodeWrapped(type, from: Data(bytes), with: PropertyListDecoder()) })
        }

        private static func encodeWrapped<Value: Encodable>(
            _ value: Value, with encoder: PropertyListEncoder
        ) throws -> Data {
            try encoder.encode([value])
        }

        private static func decodeWrapped<Value: Decodable>(
            _ type: Value.Type, from data: Data, with decoder: PropertyListDecoder
        ) throws -> Value {
            let values = try decoder.decode([Value].self, from: data)
            guard values.count == 1 else {
                throw CacheError.codecFailed(
                    operation: "decode", reason: "a property list of \(values.count) values, not 1")
            }
            return values[0]
        }
    }

    let store: Store
    let coder: Coder
    let threadPool: NIOThreadPool
    let eventLoop: any EventLoop
    let logger: Logger

    /// A cache on `disk`, running its calls on `threadPool` and completing on `eventLoop`.
    ///
    /// Most services register ``Vapor/Application/Caches/Provider/lmdb(directory:configuration:coder:)``
    /// instead, which opens the store and closes it on shutdown. A `disk` handed in here stays
    /// open: closing it is its owner's.
    public init(
        disk: DiskCache, coder: Coder = .json, threadPool: NIOThreadPool, on eventLoop: any EventLoop,
        logger: Logger = Logger(label: "LMDBCache")
    ) {
        self.init(
            store: Store(.success(disk), closesWhenReleased: false), coder: coder, threadPool: threadPool,
            on: eventLoop, logger: logger)
    }

    init(store: Store, coder: Coder, threadPool: NIOThreadPool, on eventLoop: any EventLoop, logger: Logger) {
        self.store = store
        self.coder = coder
        self.threadPool = threadPool
        self.eventLoop = eventLoop
        self.logger = logger
    }

    /// The disk tier the values live in (limits, statistics, `flush()`).
    ///
    /// - Throws: the error that kept the store from opening.
    public var disk: DiskCache {
        get throws {
            try store.opened.get()
        }
    }

    public func get<T: Decodable>(_ key: String, as type: T.Type) -> EventLoopFuture<T?> {
        // A value of `T` need not be Sendable: it is made on the pool and handed over once.
        if key.isEmpty { return eventLoop.makeSucceededFuture(Handover<T?>(nil)).map { $0.value } }
        return run { [coder, logger] disk -> Handover<T?> in
            guard let bytes = try disk.data(forKey: key) else { return Handover(nil) }
            do {
                guard let value = try coder.decode(T.self, bytes) as? T else { throw CoderMismatch() }
                return Handover(value)
            } catch {
                logger.info(
                    "LMDBCache: the value stored under a key does not decode as the type asked for; treated as a miss",
                    metadata: [
                        "key": "\(LoggedText.key(key))", "type": "\(T.self)", "error": "\(LoggedText.error(error))",
                    ])
                return Handover(nil)
            }
        }.map { $0.value }
    }

    public func set<T: Encodable>(_ key: String, to value: T?) -> EventLoopFuture<Void> {
        set(key, to: value, expiresAfter: nil)
    }

    public func set<T: Encodable>(
        _ key: String, to value: T?, expiresIn expirationTime: CacheExpirationTime?
    ) -> EventLoopFuture<Void> {
        set(key, to: value, expiresAfter: expirationTime.map(Self.duration))
    }

    public func `for`(_ request: Request) -> LMDBVaporCache {
        LMDBVaporCache(
            store: store, coder: coder, threadPool: threadPool, on: request.eventLoop, logger: request.logger)
    }

    private func set<T: Encodable>(_ key: String, to value: T?, expiresAfter: Duration?) -> EventLoopFuture<Void> {
        guard let value, expiresAfter.map({ $0 > .zero }) ?? true else {
            // Removed, or already expired: nothing to store, and the old value must not be read
            // again.
            if key.isEmpty { return eventLoop.makeSucceededVoidFuture() }
            return run { disk in try disk.removeData(forKey: key) }
        }
        let handover = Handover(value)
        return run { [coder] disk in
            try disk.setData(try coder.encode(handover.value), forKey: key, expiresAfter: expiresAfter)
        }
    }

    private func run<Result: Sendable>(_ body: @escaping @Sendable (DiskCache) throws -> Result) -> EventLoopFuture<
        Result
    > {
        // The closure holds the store until the call ends: a call under way while the application
        // shuts down finishes with the store open.
        let store = self.store
        let disk: DiskCache
        do {
            disk = try store.opened.get()
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
        return threadPool.runIfActive(eventLoop: eventLoop) { try withExtendedLifetime(store) { try body(disk) } }
            .flatMapErrorThrowing { error in
                throw error is NIOThreadPoolError.ThreadPoolInactive ? CacheError.closed : error
            }
    }

    /// `time` as a duration, without the overflow trap of `CacheExpirationTime.seconds`:
    /// `.days(Int.max)` is "forever", `.days(Int.min)` already expired.
    static func duration(_ time: CacheExpirationTime) -> Duration {
        let (count, unit): (Int, Int) =
            switch time {
            case .seconds(let count): (count, 1)
            case .minutes(let count): (count, 60)
            case .hours(let count): (count, 3_600)
            case .days(let count): (count, 86_400)
            }
        let (seconds, overflow) = count.multipliedReportingOverflow(by: unit)
        guard overflow else { return .seconds(seconds) }
        return count > 0 ? .seconds(Int64.max) : .seconds(Int64.min)
    }
}

/// A coder's `decode` returned a value of another type than the one asked for.
struct CoderMismatch: Error {}

/// A value handed from one thread to another exactly once (made on the pool and returned, or
/// made by the caller and encoded on the pool), never used by both at once.
struct Handover<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// The application's store, or why it could not be opened. It closes when the last reference
/// goes: the application's cache factory (until shutdown) and every cache and call under way
/// hold it, so a request still running while the application shuts down finishes with the store
/// open.
final class Store: Sendable {
    let opened: Result<DiskCache, any Error>
    /// False for a store the user opened and handed in: theirs to close.
    let closesWhenReleased: Bool

    init(_ opened: Result<DiskCache, any Error>, closesWhenReleased: Bool) {
        self.opened = opened
        self.closesWhenReleased = closesWhenReleased
    }

    deinit {
        if closesWhenReleased, case .success(let disk) = opened { disk.close() }
    }
}
#endif
