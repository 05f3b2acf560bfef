import Glibc

/// The free space of the volume holding a path, as `statvfs` reports it.
package enum VolumeSpace {
    /// Bytes available to an unprivileged writer on the volume holding `path`; nil when it cannot
    /// be read.
    package static func available(at path: String) -> Int? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        // Values from the kernel, but a FUSE or network file system makes them up: saturate.
        let (bytes, overflow) = UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize))
        return overflow ? Int.max : Int(clamping: bytes)
    }

    /// True when the volume holding `path` has less than 1 MiB available to the store.
    package static func isNearlyFull(at path: String) -> Bool {
        available(at: path).map { $0 < 1 << 20 } ?? false
    }
}

/// A file of reserved space in the cache directory: on a full volume even a transaction that only
/// deletes needs fresh pages, so the emergency trim first gives this space back, and takes it
/// again once writes succeed.
package struct SpaceReserve {
    package let path: String
    /// 1 MiB: room for the copy-on-write pages of several trim transactions.
    package static let size = 1 << 20

    package init(directory: StoreDirectory) {
        path = directory.file(StoreFiles.spaceReserve)
    }

    /// Allocates the reserve unless it is already there; false when the volume has no room.
    @discardableResult
    package func take() -> Bool {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return posix_fallocate(fd, 0, off_t(Self.size)) == 0
    }

    /// Frees the reserve; true when there was one.
    package func release() -> Bool {
        unlink(path) == 0
    }
}
