import Foundation

/// `FilePerKey`: one file per key in one directory, as PINDiskCache stores its objects. A write
/// goes to a temporary file renamed over the key's (atomic, as PINDiskCache's default write is);
/// a read opens, reads and closes the file and then updates its modification time, which
/// PINDiskCache uses as the access date for its LRU trimming. Nothing is synced, as in
/// PINDiskCache; synchronous writes `fsync` the file before the rename and the directory after
/// it, so the new name is on disk too.
final class FilePerKeyStore: DiskSystem {
    let name = "FilePerKey"
    let directory: String?
    private let root: String
    private let syncsEachWrite: Bool
    /// The store's directory, open for `fsync` after each rename (synchronous writes only).
    private var directoryDescriptor: Int32
    /// Ends the name of the temporary file a write goes to: unique to this process, as the names
    /// of Foundation's atomic writes are, so that two processes writing one key never write into
    /// one temporary file (the second `O_TRUNC` would cut the first's, and its rename then fail).
    private let temporarySuffix = ".tmp-\(getpid())"

    init(directory: String, durability: DiskDurability) throws {
        self.directory = directory
        root = directory
        syncsEachWrite = durability == .synchronous
        if syncsEachWrite {
            directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard directoryDescriptor >= 0 else { throw POSIXFailure("open \(directory)") }
        } else {
            directoryDescriptor = -1
        }
    }

    deinit { close() }

    var durability: WriteDurability { syncsEachWrite ? .onReturn : .never }

    /// The key's file: keys here are printable ASCII without `/`, so the key is the name.
    private func path(_ key: [UInt8]) -> String {
        root + "/" + String(decoding: key, as: UTF8.self)
    }

    func get(_ key: [UInt8]) throws -> [UInt8]? {
        let path = path(key)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw POSIXFailure("open \(path)")
        }
        defer { _ = Glibc.close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw POSIXFailure("fstat \(path)") }
        let size = Int(info.st_size)
        let value = try [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var done = 0
            while done < size {
                let got = read(descriptor, buffer.baseAddress! + done, size - done)
                guard got > 0 else { throw POSIXFailure("read \(path)") }
                done += got
            }
            count = size
        }
        // The access date PINDiskCache keeps for trimming (it sets it on its own queue).
        guard utimensat(AT_FDCWD, path, nil, 0) == 0 else { throw POSIXFailure("utimensat \(path)") }
        return value
    }

    func set(_ value: [UInt8], forKey key: [UInt8]) throws {
        let path = path(key)
        let temporary = path + temporarySuffix
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw POSIXFailure("open \(temporary)") }
        defer { _ = Glibc.close(descriptor) }
        try value.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let wrote = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
                guard wrote > 0 else { throw POSIXFailure("write \(temporary)") }
                done += wrote
            }
        }
        if syncsEachWrite, fsync(descriptor) != 0 { throw POSIXFailure("fsync \(temporary)") }
        guard rename(temporary, path) == 0 else { throw POSIXFailure("rename \(temporary)") }
        if syncsEachWrite, fsync(directoryDescriptor) != 0 { throw POSIXFailure("fsync \(root)") }
    }

    func finishWrites() throws {}

    /// Untimed: writes back everything the kernel still holds (`sync`, machine-wide: Swift does
    /// not see `syncfs`), so the writeback of this run's files does not land in the next
    /// system's run.
    func drain() throws { Glibc.sync() }

    func close() {
        if directoryDescriptor >= 0 { _ = Glibc.close(directoryDescriptor) }
        directoryDescriptor = -1
    }

    /// Stateless apart from the directory: a second instance.
    func concurrentWriter() throws -> any DiskSystem {
        try FilePerKeyStore(directory: root, durability: syncsEachWrite ? .synchronous : .standard)
    }
}

/// A failed system call, with `errno`'s message.
struct POSIXFailure: Error, CustomStringConvertible {
    let description: String

    init(_ call: String) {
        description = "\(call): \(String(cString: strerror(errno)))"
    }
}
