import LMDBCacheStorage

/// The disk tier's handle on the store's ``Environment`` (Storage's): the boundary where errors
/// cross from the storage layer to the library.
///
/// Each call that can throw runs through ``storage(_:)``, so a ``StorageError`` thrown by the
/// environment, its writer thread or a transaction's call inside `body` reaches the disk tier as
/// the ``CacheError`` of the same case; an error `body` throws itself passes unchanged. DiskStore
/// holds only this, never the environment itself, so no call of the disk tier can skip the
/// conversion.
struct StoreEnvironment: Sendable {
    /// The environment, for the calls that cannot throw.
    let raw: Environment
    /// The environment's writer thread, its waits converted the same way.
    var writer: Writer { Writer(raw: raw.writer) }
    /// The store's databases by name.
    var databases: [String: Database] { raw.databases }
    var options: Environment.Options { raw.options }
    /// The map's size in bytes.
    var mapSize: Int { raw.mapSize }

    /// ``Environment/read(_:)``.
    @inline(__always)
    func read<T>(_ body: (ReadTransaction) throws -> T) throws -> T {
        try storage { try raw.read(body) }
    }

    /// ``Environment/write(durably:_:)``.
    @inline(__always)
    func write<T>(durably: Bool = false, _ body: (WriteTransaction) throws -> T) throws -> T {
        try storage { try raw.write(durably: durably, body) }
    }

    /// ``Environment/sync()``.
    func sync() throws { try storage { try raw.sync() } }

    /// ``Environment/bytesFreedSinceSync()``.
    func bytesFreedSinceSync() throws -> Int { try storage { try raw.bytesFreedSinceSync() } }

    /// ``Environment/compactInPlace()``.
    func compactInPlace() throws { try storage { try raw.compactInPlace() } }

    /// ``Environment/pageStatistics()``.
    func pageStatistics() throws -> PageStatistics { try storage { try raw.pageStatistics() } }

    /// ``Environment/readerSlots()``.
    func readerSlots() throws -> [ReaderSlot] { try storage { try raw.readerSlots() } }

    /// ``Environment/clearStaleReaders()``.
    @discardableResult
    func clearStaleReaders() -> Int { raw.clearStaleReaders() }

    /// ``Environment/clearStaleReaders(before:)``.
    func clearStaleReaders(before occasion: String) { raw.clearStaleReaders(before: occasion) }

    /// ``Environment/close()``.
    func close() { raw.close() }

    /// The writer thread (``WriterThread``), with ``CacheError/closed`` for a stopped one.
    struct Writer {
        let raw: WriterThread

        /// ``WriterThread/sync(_:)``.
        func sync<T>(_ job: () throws -> T) throws -> T { try storage { try raw.sync(job) } }

        /// ``WriterThread/async(_:)``.
        @discardableResult
        func async(_ job: @escaping @Sendable () -> Void) -> Bool { raw.async(job) }

        /// ``WriterThread/runHereIfIdle(_:)``.
        func runHereIfIdle<T>(_ job: () throws -> T) rethrows -> T? { try raw.runHereIfIdle(job) }

        /// ``WriterThread/isCurrent``.
        var isCurrent: Bool { raw.isCurrent }
    }
}
