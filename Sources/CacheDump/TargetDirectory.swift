import Foundation
import LMDBCache
import LMDBCacheStorage

/// Opens the cache directory a command names, after the checks every command makes: the path is
/// a directory holding a store, and none of the store's files is a symbolic link (the tool never
/// follows one out of the cache directory).
enum TargetDirectory {
    /// The files and folders LMDBCache keeps in a cache directory.
    static let storeFiles = StoreFiles.regular + [StoreFiles.compactionFolder]

    /// Opens the store to read it only: nothing in the directory changes.
    static func openForReading(_ path: String) throws -> DiskCache {
        try check(path, mustExist: true)
        return try DiskCache.openForInspection(directory: URL(fileURLWithPath: path))
    }

    /// Opens the store to change it, without trimming of its own; a damaged store is reported,
    /// never set aside. With `creating`, a missing cache is created (owner-only).
    static func openForWriting(_ path: String, creating: Bool = false) throws -> DiskCache {
        try check(path, mustExist: !creating)
        var configuration = DiskCache.Configuration()
        configuration.automaticTrimming = false
        configuration.damagedStore = .fail
        return try DiskCache(directory: URL(fileURLWithPath: path), configuration: configuration)
    }

    private static func check(_ path: String, mustExist: Bool) throws {
        var info = stat()
        if stat(path, &info) != 0 {
            if !mustExist && errno == ENOENT { return }
            throw DumpFailure(.notACache, "\(path) is not a cache directory: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw DumpFailure(.notACache, "\(path) is not a cache directory: it is not a directory")
        }
        for name in storeFiles {
            let file = path + "/" + name
            var link = stat()
            if lstat(file, &link) == 0, link.st_mode & S_IFMT == S_IFLNK {
                let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: file)) ?? "?"
                throw DumpFailure(
                    .unsafePath,
                    "refusing to follow the symbolic link \(file) (to \(target)) out of the cache directory")
            }
        }
        if mustExist && access(path + "/" + StoreFiles.data, F_OK) != 0 {
            throw DumpFailure(.notACache, "\(path) is not a cache directory: it has no data.mdb")
        }
    }
}
