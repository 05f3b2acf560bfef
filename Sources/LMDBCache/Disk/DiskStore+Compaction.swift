import Glibc
import LMDBCacheStorage

extension DiskStore {
    /// Commits the queue, then rewrites the file without free pages and swaps it in.
    ///
    /// - Throws: ``CacheError/storeInUse(path:operation:)`` while another process has the store open.
    func compact() throws {
        try env.writer.sync {
            drain()
            try env.sync()
            let done: Void? = try presence.alone { try env.compactInPlace() }
            if done == nil { throw CacheError.storeInUse(path: path, operation: "compact") }
        }
    }

    /// Bytes of the data file.
    var fileSize: Int {
        var info = stat()
        return fstatat(directory.descriptor, StoreFiles.data, &info, 0) == 0 ? Int(info.st_size) : 0
    }
}
