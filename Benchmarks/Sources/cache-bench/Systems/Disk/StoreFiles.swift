import Foundation

/// What the disk suite does to a store's files from outside the store: measures them, drops them
/// from the page cache, and asks how much of them is still cached.
enum StoreFiles {
    /// Every regular file under `directory`, recursively.
    static func files(under directory: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
        var files: [String] = []
        while let relative = enumerator.nextObject() as? String {
            let path = directory + "/" + relative
            var info = stat()
            if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG { files.append(path) }
        }
        return files
    }

    /// Bytes the files under `directory` hold on disk: for each file the smaller of its allocated
    /// blocks and its length rounded up to 4 KiB, so neither a sparse file's holes nor space
    /// allocated ahead past its end (RocksDB preallocates its write-ahead log) count.
    static func bytesOnDisk(_ directory: String) -> Int {
        files(under: directory).reduce(0) { total, path in
            var info = stat()
            guard lstat(path, &info) == 0 else { return total }
            let allocated = Int(clamping: info.st_blocks).multipliedReportingOverflow(by: 512)
            let length = Int(clamping: info.st_size)
            let rounded = length > Int.max - 4_095 ? length : (length + 4_095) / 4_096 * 4_096
            return total &+ (allocated.overflow ? rounded : min(allocated.partialValue, rounded))
        }
    }

    /// Writes back and then drops every file under `directory` from the page cache
    /// (`fdatasync`, then `posix_fadvise(POSIX_FADV_DONTNEED)`). Pages still mapped by a process
    /// stay cached, so the store must be closed first (and must be, for its locks: see
    /// ``residentShare(_:)``).
    static func dropFromPageCache(_ directory: String) throws {
        for path in files(under: directory) {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw POSIXFailure("open \(path)") }
            defer { _ = Glibc.close(descriptor) }
            guard fdatasync(descriptor) == 0 else { throw POSIXFailure("fdatasync \(path)") }
            let advised = posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED)
            guard advised == 0 else {
                errno = advised
                throw POSIXFailure("posix_fadvise \(path)")
            }
        }
    }

    /// Drops the kernel's cached directory entries and inodes, machine-wide (`2` into
    /// `/proc/sys/vm/drop_caches`; needs root), so FilePerKey's path lookups are as cold as the
    /// other stores' B-tree pages. False when it could not.
    static func dropInodeAndDentryCaches() -> Bool {
        let descriptor = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { _ = Glibc.close(descriptor) }
        return write(descriptor, "2\n", 2) == 2
    }

    /// The share (0–1) of the pages of the files under `directory` now in the page cache
    /// (`mincore` over a fresh read-only mapping of each, which faults nothing in). Only for a
    /// closed store: closing a descriptor of a file drops every POSIX record lock this process
    /// holds on it, the locks an open LMDB or SQLite store keeps on its files.
    static func residentShare(_ directory: String) -> Double {
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        var pages = 0
        var resident = 0
        for path in files(under: directory) {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { continue }
            defer { _ = Glibc.close(descriptor) }
            var info = stat()
            guard fstat(descriptor, &info) == 0, info.st_size > 0 else { continue }
            let size = Int(clamping: info.st_size)
            guard let mapping = mmap(nil, size, PROT_READ, MAP_SHARED, descriptor, 0), mapping != MAP_FAILED
            else { continue }
            defer { munmap(mapping, size) }
            let count = (size + pageSize - 1) / pageSize
            var vector = [UInt8](repeating: 0, count: count)
            guard mincore(mapping, size, &vector) == 0 else { continue }
            pages += count
            resident += vector.reduce(0) { $0 + Int($1 & 1) }
        }
        return pages > 0 ? Double(resident) / Double(pages) : 0
    }
}
