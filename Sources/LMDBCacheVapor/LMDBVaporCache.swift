#if Vapor
    import Foundation
    import LMDBCache
    import Logging
    import NIOCore
    import NIOPosix
    import Vapor

    /// Vapor's `Cache` on an LMDBCache disk tier: bounded, persistent across restarts, and shared by
    /// every process that opens the same directory.
    ///
    /// Register it the Vapor way; the store is opened at once and closed when the application shuts
    /// down:
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
    /// (stored as another type, say) is a miss, logged at warning level, and stays stored, as
    /// Vapor's `MemoryCache` returns nil for it. Reads and writes run on the application's thread
    /// pool, never on an event loop: a write in ``DiskCache/Durability/synchronous`` mode waits for
    /// the disk.
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
            public static var propertyList: Coder {
                Coder(
                    encode: { value in
                        let encoder = PropertyListEncoder()
                        encoder.outputFormat = .binary
                        return Array(try encoder.encode(value))
                    },
                    decode: { type, bytes in try PropertyListDecoder().decode(type, from: Data(bytes)) })
            }
        }

        /// The store, or why it could not be opened.
        enum Store: Sendable {
            case open(DiskCache)
            case failed(any Error)
        }

        let store: Store
        let coder: Coder
        let threadPool: NIOThreadPool
        let eventLoop: any EventLoop
        let logger: Logger

        /// A cache on `disk`, running its calls on `threadPool` and completing on `eventLoop`.
        ///
        /// Most services register ``Vapor/Application/Caches/Provider/lmdb(directory:configuration:coder:)``
        /// instead, which opens the store and closes it on shutdown.
        public init(
            disk: DiskCache, coder: Coder = .json, threadPool: NIOThreadPool, on eventLoop: any EventLoop,
            logger: Logger = Logger(label: "LMDBCache")
        ) {
            self.init(store: .open(disk), coder: coder, threadPool: threadPool, on: eventLoop, logger: logger)
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
                switch store {
                case .open(let disk): return disk
                case .failed(let error): throw error
                }
            }
        }

        public func get<T: Decodable>(_ key: String, as type: T.Type) -> EventLoopFuture<T?> {
            // The read on the thread pool; the decoding where the future completes (a value of `T`
            // need not be Sendable, so it is made on the event loop).
            run { disk in try disk.data(forKey: key) }.map { [coder, logger] bytes -> T? in
                guard let bytes else { return nil }
                do {
                    guard let value = try coder.decode(T.self, bytes) as? T else { throw CoderMismatch() }
                    return value
                } catch {
                    logger.warning(
                        "LMDBCache: the value stored under a key does not decode as the type asked for; treated as a miss",
                        metadata: [
                            "key": "\(LoggedText.key(key))", "type": "\(T.self)", "error": "\(LoggedText.error(error))",
                        ])
                    return nil
                }
            }
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
            guard let value else { return run { disk in try disk.removeData(forKey: key) } }
            if let expiresAfter, expiresAfter <= .zero {
                // Already expired: nothing to store, and the old value must not be read again.
                return run { disk in try disk.removeData(forKey: key) }
            }
            // Encoded here, on the caller's thread: a value of `T` need not be Sendable.
            let bytes: [UInt8]
            do {
                bytes = try coder.encode(value)
            } catch {
                return eventLoop.makeFailedFuture(error)
            }
            return run { disk in try disk.setData(bytes, forKey: key, expiresAfter: expiresAfter) }
        }

        private func run<Result: Sendable>(_ body: @escaping @Sendable (DiskCache) throws -> Result) -> EventLoopFuture<
            Result
        > {
            switch store {
            case .failed(let error):
                return eventLoop.makeFailedFuture(error)
            case .open(let disk):
                return threadPool.runIfActive(eventLoop: eventLoop) { try body(disk) }
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
#endif
