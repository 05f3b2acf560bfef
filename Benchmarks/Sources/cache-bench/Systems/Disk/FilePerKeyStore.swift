import Foundation

/// `FilePerKey`: one file per key in one directory, as PINDiskCache stores its objects. A write
/// goes to a temporary file renamed over the key's (atomic, as PINDiskCache's default write is);
/// a read opens, reads and closes the file and then updates its modification time, which
/// PINDiskCache uses as the access date for its LRU trimming. Synchronous writes `fsync` the
/// file before the rename.
final class FilePerKeyStore: DiskSystem {
    let name = "FilePerKey"
    private let directory: String
    private let syncsEachWrite: Bool

    init(directory: String, durability: DiskDurability) throws {
        self.directory = directory
        syncsEachWrite = durability == .synchronous
    }

    /// The key's file: keys here are printable ASCII without `/`, so the key is the name.
    private func path(_ key: [UInt8]) -> String {
        directory + "/" + String(decoding: key, as: UTF8.self)
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
        let temporary = path + ".tmp"
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
    }

    func finishWrites() throws {}

    func close() {}
}

/// A failed system call, with `errno`'s message.
struct POSIXFailure: Error, CustomStringConvertible {
    let description: String

    init(_ call: String) {
        description = "\(call): \(String(cString: strerror(errno)))"
    }
}
