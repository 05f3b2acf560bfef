import CLMDB
import Foundation
import Glibc
import Logging

/// Keeps a `.periodic` store's last synced snapshot recoverable after a power loss.
///
/// With `MDB_NOSYNC`, commits after a sync write pages and meta pages that the disk may keep in
/// any order: after a power loss the newest meta page can point at pages that never reached the
/// disk, or that hold an older tree, so the store opens without complaint but misses entries a
/// returned `flush()` had synced. LMDB 0.9.24 has no `MDB_PREVSNAPSHOT`.
///
/// So after each sync this process holds a read transaction on the synced snapshot (LMDB then
/// reuses none of its pages) and records that snapshot's meta page, the data file's identity and
/// the boot id in `synced-snapshot`, synced before the previous snapshot is let go. The first
/// open in a later boot (alone on the store) finds the newest meta page newer than the record and
/// writes the recorded meta into both meta slots: the store opens at exactly the last synced
/// snapshot. A kill -9 (same boot, page cache intact) changes nothing.
final class SyncedSnapshot: @unchecked Sendable {
    /// The record's file, in the cache directory.
    static let fileName = StoreFiles.syncedSnapshot
    /// Replaces the boot id, for the power-loss tests: a crash state opened in the "next boot".
    static let bootIdentifierOverride = "LMDBCACHE_TEST_BOOT_ID"
    /// For the power-loss tests, which rebuild each crash state's `data.mdb` as a new file where a
    /// real power loss keeps the inode: the record applies to it all the same.
    static let fileIdentityOverride = "LMDBCACHE_TEST_SAME_FILE"

    /// The meta page's bytes that LMDB itself rewrites on every commit (`mm_mapsize` through
    /// `mm_txnid`, 64-bit layout of liblmdb 0.9), and where the transaction id lies in the page.
    private static let metaRewrittenRange = 32..<152
    private static let metaMagicOffset = 16
    private static let metaTxnidOffset = 144
    private static let metaMagic: UInt32 = 0xBEEF_C0DE
    private static let recordMagic: [UInt8] = Array("LMDBCSS1".utf8)
    private static let bootIdentifierLength = 40

    private let directory: StoreDirectory
    /// The read transaction pinning the last recorded snapshot; only the writer thread (or
    /// `close`, after it stopped) touches it.
    private var held: OpaquePointer?

    init(directory: StoreDirectory) {
        self.directory = directory
    }

    /// Syncs the data file and records the synced snapshot, pinning it until the next call. False,
    /// doing nothing, when another process grew the map: adopt its size, then call again.
    @discardableResult
    func syncAndRecord(_ env: OpaquePointer) throws -> Bool {
        var reader: OpaquePointer?
        let begin = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &reader)
        if begin == MDB_MAP_RESIZED { return false }
        try LMDBStatus.check(begin, "mdb_txn_begin(synced snapshot)", path: directory.path)
        // Begun before the sync: its snapshot was committed, so the sync makes it durable.
        let transaction = UInt64(mdb_txn_id(reader))
        do {
            try LMDBStatus.check(mdb_env_sync(env, 1), "mdb_env_sync", path: directory.path)
            var descriptor: Int32 = -1
            try LMDBStatus.check(mdb_env_get_fd(env, &descriptor), "mdb_env_get_fd", path: directory.path)
            var statistics = MDB_stat()
            try LMDBStatus.check(mdb_env_stat(env, &statistics), "mdb_env_stat", path: directory.path)
            guard try record(transaction: transaction, dataDescriptor: descriptor, pageSize: Int(statistics.ms_psize))
            else {
                // Another process already wrote over this snapshot's meta slot: keep the older pin.
                mdb_txn_abort(reader)
                return true
            }
        } catch {
            mdb_txn_abort(reader)
            throw error
        }
        if let held { mdb_txn_abort(held) }
        held = reader
        return true
    }

    /// The transaction id of the snapshot pinned, if any. Writer thread only.
    var pinnedTransaction: Int? { held.map { Int(mdb_txn_id($0)) } }

    /// Lets the pinned snapshot go (before the environment closes or is swapped).
    func release() {
        if let held { mdb_txn_abort(held) }
        held = nil
    }

    /// Writes the record for snapshot `transaction`; false when its meta slot no longer holds it.
    private func record(transaction: UInt64, dataDescriptor: Int32, pageSize: Int) throws -> Bool {
        var file = stat()
        guard fstat(dataDescriptor, &file) == 0 else { throw unavailable("cannot stat data.mdb") }
        var meta = [UInt8](repeating: 0, count: Self.metaRewrittenRange.upperBound)
        let slotOffset = off_t(Int(transaction & 1) * pageSize)
        guard pread(dataDescriptor, &meta, meta.count, slotOffset) == meta.count,
            Self.number(meta, at: Self.metaTxnidOffset) == transaction
        else { return false }
        var record = Self.recordMagic
        Self.append(UInt64(file.st_dev), to: &record)
        Self.append(UInt64(file.st_ino), to: &record)
        Self.append(transaction, to: &record)
        Self.append(UInt64(pageSize), to: &record)
        record += Self.bootIdentifier()
        record += meta
        Self.append(UInt64(Self.checksum(record)), to: &record)
        let path = directory.file(Self.fileName)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw unavailable("cannot open \(Self.fileName)") }
        defer { close(descriptor) }
        // One sector, rewritten in place: a torn write is impossible at sector granularity and
        // the checksum catches anything else.
        guard pwrite(descriptor, record, record.count, 0) == record.count, fdatasync(descriptor) == 0 else {
            throw unavailable("cannot write \(Self.fileName)")
        }
        return true
    }

    /// Removes the record: the data file it describes is gone or is no longer kept recoverable.
    /// Durable before the caller swaps the data file: a record must never outlive its file.
    static func forget(directory: StoreDirectory) {
        guard unlinkat(directory.descriptor, fileName, 0) == 0 else { return }
        fsync(directory.descriptor)
    }

    /// On the first open after a power loss (a record from another boot, its data file still in
    /// place, its newest meta page newer than the record), writes the recorded meta page into
    /// both meta slots, so LMDB opens the last synced snapshot. Call before `mdb_env_open`, holding
    /// `presence` shared; it runs only if no other process has the store open.
    static func recoverIfNeeded(directory: StoreDirectory, presence: ProcessPresence, logger: Logger) throws {
        // Only alone: a process that has the store open has it in this boot, past any recovery.
        _ = try presence.alone { try recoverAlone(directory: directory, logger: logger) }
    }

    private static func recoverAlone(directory: StoreDirectory, logger: Logger) throws {
        let recordPath = directory.file(fileName)
        guard let record = FileManager.default.contents(atPath: recordPath).map([UInt8].init),
            let parsed = Parsed(record)
        else { return }
        guard parsed.bootIdentifier != bootIdentifier() else { return }
        let dataPath = directory.file(StoreFiles.data)
        let descriptor = open(dataPath, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var file = stat()
        let sameFile = ProcessInfo.processInfo.environment[fileIdentityOverride] == "1"
        guard fstat(descriptor, &file) == 0,
            sameFile || (UInt64(file.st_dev) == parsed.device && UInt64(file.st_ino) == parsed.inode),
            let pageSize = Int(exactly: parsed.pageSize), pageSize > 0, pageSize <= 1 << 16
        else {
            // A different file (compacted, set aside, replaced): the record says nothing about it.
            forget(directory: directory)
            return
        }
        var newest: UInt64 = 0
        for slot in 0..<2 {
            var meta = [UInt8](repeating: 0, count: metaRewrittenRange.upperBound)
            guard pread(descriptor, &meta, meta.count, off_t(slot * pageSize)) == meta.count else { continue }
            guard UInt32(truncatingIfNeeded: number(meta, at: metaMagicOffset)) == metaMagic else { continue }
            newest = max(newest, number(meta, at: metaTxnidOffset))
        }
        guard newest > parsed.transaction else { return }
        let rewritten = Array(parsed.meta[metaRewrittenRange])
        for slot in 0..<2 {
            let offset = off_t(slot * pageSize + metaRewrittenRange.lowerBound)
            guard pwrite(descriptor, rewritten, rewritten.count, offset) == rewritten.count else {
                throw StorageError.directoryUnavailable(
                    path: directory.path, reason: "cannot restore the last synced snapshot: \(errnoText())")
            }
        }
        guard fdatasync(descriptor) == 0 else {
            throw StorageError.directoryUnavailable(
                path: directory.path, reason: "cannot restore the last synced snapshot: \(errnoText())")
        }
        logger.warning(
            "LMDBCache found unsynced commits after an unclean shutdown; reopened at the last synced snapshot",
            metadata: [
                "path": .escaped(directory.path), "syncedTransaction": "\(parsed.transaction)",
                "discardedThrough": "\(newest)",
            ])
    }

    // MARK: The record's layout

    private struct Parsed {
        var device: UInt64
        var inode: UInt64
        var transaction: UInt64
        var pageSize: UInt64
        var bootIdentifier: [UInt8]
        var meta: [UInt8]

        init?(_ bytes: [UInt8]) {
            let metaStart = 8 + 32 + SyncedSnapshot.bootIdentifierLength
            let length = metaStart + SyncedSnapshot.metaRewrittenRange.upperBound
            guard bytes.count >= length + 8, Array(bytes[0..<8]) == SyncedSnapshot.recordMagic,
                SyncedSnapshot.number(bytes, at: length) == UInt64(SyncedSnapshot.checksum(Array(bytes[0..<length])))
            else { return nil }
            device = SyncedSnapshot.number(bytes, at: 8)
            inode = SyncedSnapshot.number(bytes, at: 16)
            transaction = SyncedSnapshot.number(bytes, at: 24)
            pageSize = SyncedSnapshot.number(bytes, at: 32)
            bootIdentifier = Array(bytes[40..<metaStart])
            meta = Array(bytes[metaStart..<length])
        }
    }

    /// This boot's identifier, padded to a fixed length (the test override first).
    private static func bootIdentifier() -> [UInt8] {
        let text =
            ProcessInfo.processInfo.environment[bootIdentifierOverride]
            ?? (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        let bytes = Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8.prefix(bootIdentifierLength))
        return bytes + [UInt8](repeating: 0, count: bootIdentifierLength - bytes.count)
    }

    private static func number(_ bytes: [UInt8], at start: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[start + index]) << (8 * index) }
        return value
    }

    private static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private static func checksum(_ bytes: [UInt8]) -> UInt {
        UInt(bytes.withUnsafeBytes { CRC32.checksum($0) })
    }

    private func unavailable(_ what: String) -> StorageError {
        .directoryUnavailable(path: directory.path, reason: "\(what): \(errnoText())")
    }
}
