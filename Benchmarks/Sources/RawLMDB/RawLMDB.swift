import CBenchLMDB
import CBenchZlib

/// A failed call or check in the benchmark, with a message saying which.
public struct BenchError: Error, CustomStringConvertible {
    public let description: String

    public init(description: String) { self.description = description }
}

/// Throws when `code` is not `MDB_SUCCESS`.
private func check(_ code: Int32, _ operation: String) throws {
    guard code == MDB_SUCCESS else { throw lmdbError(code, operation) }
}

private func lmdbError(_ code: Int32, _ operation: String) -> BenchError {
    BenchError(description: "\(operation): \(String(cString: mdb_strerror(code))) (\(code))")
}

/// The baseline: one LMDB environment with its unnamed database, driven by plain C calls the way
/// a careful C program would, with no records, indexes, totals, queue or locks of its own.
///
/// Reads reuse one read-only transaction (`mdb_txn_reset` after each lookup, `mdb_txn_renew`
/// before the next). Not thread-safe; the benchmarks use it from one thread.
public final class RawLMDB {
    private let env: OpaquePointer
    private let dbi: MDB_dbi
    private var reader: OpaquePointer?
    /// The write transaction ``put(_:_:perTransaction:)`` keeps open between calls.
    private var writer: OpaquePointer?
    private var writesInTransaction = 0
    private var isClosed = false

    /// Environment flags of the batched baseline: no thread-local reader slots, no syncs on commit.
    /// Every set has `MDB_NORDAHEAD`, as LMDBCache's environment does: a page fault reads its page,
    /// not the 128 KiB around it (which would warm a small store after a few cold reads).
    public static let batchedFlags = MDB_NOTLS | MDB_NORDAHEAD | MDB_NOSYNC
    /// Environment flags of the baseline in LMDBCache's default mode: each commit syncs its data
    /// pages (`fdatasync`), the meta page with the next commit's sync.
    public static let perBatchFlags = MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC
    /// Environment flags of the synchronous baseline: every commit syncs data and meta pages.
    public static let synchronousFlags = MDB_NOTLS | MDB_NORDAHEAD

    /// Opens (creating) an environment in the existing `directory`.
    public init(directory: String, flags: Int32 = RawLMDB.batchedFlags, mapSize: Int = 8 << 30) throws {
        var created: OpaquePointer?
        try check(mdb_env_create(&created), "mdb_env_create")
        guard let created else { throw BenchError(description: "mdb_env_create returned no environment") }
        do {
            try check(mdb_env_set_mapsize(created, mapSize), "mdb_env_set_mapsize")
            try check(mdb_env_open(created, directory, UInt32(flags), 0o600), "mdb_env_open")
            var txn: OpaquePointer?
            try check(mdb_txn_begin(created, nil, 0, &txn), "mdb_txn_begin")
            var handle: MDB_dbi = 0
            let opened = mdb_dbi_open(txn, nil, 0, &handle)
            guard opened == MDB_SUCCESS else {
                mdb_txn_abort(txn)
                throw lmdbError(opened, "mdb_dbi_open")
            }
            try check(mdb_txn_commit(txn), "mdb_txn_commit")
            dbi = handle
        } catch {
            mdb_env_close(created)
            throw error
        }
        env = created
    }

    deinit {
        close()
    }

    /// Ends the reused read transaction and closes the environment. Later calls are errors.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        if let writer { mdb_txn_abort(writer) }
        writer = nil
        if let reader { mdb_txn_abort(reader) }
        reader = nil
        mdb_env_close(env)
    }

    // MARK: Writes

    /// Puts `count` entries, `perTransaction` to a write transaction; `key(i)` and `value(i)` give
    /// entry `i`. Does not sync (see ``sync()``) unless the environment syncs on commit.
    public func put(
        count: Int, perTransaction: Int, key: (Int) -> [UInt8], value: (Int) -> [UInt8]
    ) throws {
        var start = 0
        while start < count {
            let end = min(start + perTransaction, count)
            var txn: OpaquePointer?
            try check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
            do {
                for index in start..<end {
                    try put(txn, key(index), value(index))
                }
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
            try check(mdb_txn_commit(txn), "mdb_txn_commit")
            start = end
        }
    }

    /// Puts one entry into a write transaction kept open between calls, committing it after
    /// `perTransaction` puts (1: every put commits, and syncs unless the environment has
    /// `MDB_NOSYNC`). ``commit()`` commits the rest.
    public func put(_ key: [UInt8], _ value: [UInt8], perTransaction: Int) throws {
        if writer == nil {
            var txn: OpaquePointer?
            try check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
            writer = txn
        }
        try put(writer, key, value)
        writesInTransaction += 1
        if writesInTransaction >= perTransaction { try commit() }
    }

    /// Commits the write transaction ``put(_:_:perTransaction:)`` left open, if any.
    public func commit() throws {
        guard let txn = writer else { return }
        writer = nil
        writesInTransaction = 0
        try check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    private func put(_ txn: OpaquePointer?, _ key: [UInt8], _ value: [UInt8]) throws {
        try key.withUnsafeBytes { keyBytes in
            try value.withUnsafeBytes { valueBytes in
                var k = bench_mdb_val(keyBytes.baseAddress, keyBytes.count)
                var v = bench_mdb_val(valueBytes.baseAddress, valueBytes.count)
                try check(mdb_put(txn, dbi, &k, &v, 0), "mdb_put")
            }
        }
    }

    /// Flushes buffered pages and the meta page to disk (`mdb_env_sync(env, 1)`).
    public func sync() throws {
        try check(mdb_env_sync(env, 1), "mdb_env_sync")
    }

    // MARK: Reads

    /// Looks `key` up in the reused read transaction and passes the value (valid only inside
    /// `body`) to `body`; nil when the key is missing.
    @inline(__always)
    public func withValue<T>(forKey key: [UInt8], _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        // A write transaction still open on this thread holds writes the reused read transaction
        // cannot see: look there, as a C program reading its own writes would.
        if readsOwnWrites, let writer { return try value(in: writer, forKey: key, body) }
        let txn = try renewedReader()
        defer { mdb_txn_reset(txn) }
        return try value(in: txn, forKey: key, body)
    }

    /// Whether ``withValue(forKey:_:)`` looks in the open write transaction, if any (true, the
    /// default). Set it to false before another thread starts writing through this instance:
    /// then each thread uses only its own transaction.
    public var readsOwnWrites = true

    @inline(__always)
    private func value<T>(
        in txn: OpaquePointer, forKey key: [UInt8], _ body: (UnsafeRawBufferPointer) throws -> T
    ) throws -> T? {
        try key.withUnsafeBytes { keyBytes -> T? in
            var k = bench_mdb_val(keyBytes.baseAddress, keyBytes.count)
            var v = MDB_val()
            let code = mdb_get(txn, dbi, &k, &v)
            if code == MDB_NOTFOUND { return nil }
            try check(code, "mdb_get")
            return try body(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
        }
    }

    private func renewedReader() throws -> OpaquePointer {
        if let reader {
            try check(mdb_txn_renew(reader), "mdb_txn_renew")
            return reader
        }
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin(read)")
        reader = txn
        return txn!
    }
}

/// A raw-deflate stream (no zlib header or adler32, as the library writes) reused across calls
/// with `deflateReset`.
public final class RawDeflater {
    private let stream: UnsafeMutablePointer<z_stream>

    /// A stream at zlib `level` (the library's default is 1).
    public init(level: Int32) throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status = bench_deflate_init(stream, level)
        guard status == Z_OK else {
            stream.deallocate()
            throw BenchError(description: "deflateInit2 failed (\(status))")
        }
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
    }

    /// `input` deflated (stored blocks when it does not shrink, as zlib does).
    public func deflate(_ input: [UInt8]) throws -> [UInt8] {
        defer { deflateReset(stream) }
        let bound = Int(deflateBound(stream, uLong(input.count)))
        var status: Int32 = Z_OK
        let output = input.withUnsafeBufferPointer { source in
            [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                stream.pointee.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.pointee.avail_in = uInt(source.count)
                stream.pointee.next_out = buffer.baseAddress
                stream.pointee.avail_out = uInt(bound)
                status = CBenchZlib.deflate(stream, Z_FINISH)
                count = status == Z_STREAM_END ? Int(stream.pointee.total_out) : 0
            }
        }
        guard status == Z_STREAM_END else { throw BenchError(description: "deflate failed (\(status))") }
        return output
    }
}

/// A raw-inflate stream reused across calls with `inflateReset`.
public final class RawInflater {
    private let stream: UnsafeMutablePointer<z_stream>

    public init() throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status = bench_inflate_init(stream)
        guard status == Z_OK else {
            stream.deallocate()
            throw BenchError(description: "inflateInit2 failed (\(status))")
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }

    /// `input` inflated into a new array of exactly `length` bytes; nil when it is not a complete
    /// deflate stream of that length.
    @inline(__always)
    public func inflate(_ input: UnsafeRawBufferPointer, length: Int) -> [UInt8]? {
        defer { inflateReset(stream) }
        var ok = false
        let output = [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            stream.pointee.next_in = UnsafeMutablePointer(
                mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
            stream.pointee.avail_in = uInt(input.count)
            stream.pointee.next_out = buffer.baseAddress
            stream.pointee.avail_out = uInt(length)
            let status = CBenchZlib.inflate(stream, Z_FINISH)
            ok = status == Z_STREAM_END && Int(stream.pointee.total_out) == length
            count = ok ? length : 0
        }
        return ok ? output : nil
    }
}

/// The baseline's stored form of a compressed value: a 4-byte little-endian original length,
/// then the raw-deflated bytes.
public enum DeflatedValue {
    public static func encode(_ value: [UInt8], with deflater: RawDeflater) throws -> [UInt8] {
        withUnsafeBytes(of: UInt32(value.count).littleEndian, Array.init) + (try deflater.deflate(value))
    }

    /// The original value of a stored `bytes`, inflated; nil when malformed.
    @inline(__always)
    public static func decode(_ bytes: UnsafeRawBufferPointer, with inflater: RawInflater) -> [UInt8]? {
        guard bytes.count >= 4 else { return nil }
        let length = Int(UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)))
        return inflater.inflate(UnsafeRawBufferPointer(rebasing: bytes[4...]), length: length)
    }
}
