import Glibc
import Logging

/// A lock every process holds shared on `processes.lock` while it has the store open, so that an
/// operation that swaps or sets aside the store's file (compaction, repair, setting a damaged file
/// aside) can have the store to itself.
///
/// The shared lock is taken before LMDB opens the store and kept until after LMDB closes it, so a
/// process that holds it exclusively knows no other process has the file mapped, and a process
/// that opens meanwhile waits for the swap to finish before LMDB looks at the file. (An opener
/// that mapped the old file while the copy was swapped in would keep writing to the unlinked file,
/// or, with LMDB's transaction id in `lock.mdb` out of step with the new file, commit over the
/// copy's only valid meta page.)
///
/// Open file description locks (`F_OFD_SETLK`), not `flock`: converting a shared `flock` to an
/// exclusive one is not atomic (a failed attempt can drop the shared lock, letting a second
/// compactor in), while a failed `F_OFD_SETLK` upgrade leaves the shared lock in place.
package final class ProcessPresence: @unchecked Sendable {
    /// -1 once closed (or for a read-only open of a store without the file).
    private let descriptor: Locked<Int32>

    // Linux's values (fcntl.h, any architecture); Glibc's module does not export them.
    private static let setLock: Int32 = 37  // F_OFD_SETLK
    private static let setLockWaiting: Int32 = 38  // F_OFD_SETLKW

    /// Opens `processes.lock` in `directory` and takes the shared lock, waiting up to `timeout`
    /// while another process holds it exclusively (a compaction or repair copying the store), then
    /// throwing ``StorageError/storeInUse(path:operation:)``. `readOnly` neither creates the file
    /// nor fails without it (a store only inspected then simply does not show).
    package init(directory: StoreDirectory, readOnly: Bool = false, timeout: Duration, logger: Logger) throws {
        let flags = (readOnly ? O_RDONLY : O_RDWR | O_CREAT) | O_CLOEXEC | O_NOFOLLOW
        let file = openat(directory.descriptor, StoreFiles.processPresence, flags, 0o600)
        let openError = errno  // before anything else can change it
        descriptor = Locked(file)
        if readOnly && file < 0 && openError == ENOENT { return }
        guard file >= 0 else {
            throw StorageError.directoryUnavailable(
                path: directory.path, reason: "cannot open processes.lock: \(errnoText(openError))")
        }
        // Polled, not waited on with F_OFD_SETLKW: a wait could not end at a deadline.
        let deadline = ContinuousClock.now.advanced(by: timeout)
        var pause = Duration.milliseconds(1)
        var code = Self.lock(file, F_RDLCK, waiting: false)
        if code == EAGAIN || code == EACCES {
            logger.info(
                "LMDBCache is waiting for another process that has the store to itself (a compaction or repair)",
                metadata: ["path": .escaped(directory.path), "timeout": "\(timeout)"])
        }
        while code == EAGAIN || code == EACCES, ContinuousClock.now < deadline {
            let remaining = ContinuousClock.now.duration(to: deadline)
            Self.pause(min(pause, remaining))
            pause = min(pause * 2, .milliseconds(50))
            code = Self.lock(file, F_RDLCK, waiting: false)
        }
        guard code == 0 else {
            close()
            if code == EAGAIN || code == EACCES {
                throw StorageError.storeInUse(
                    path: directory.path,
                    operation: "open (waited \(timeout) for another process's compaction or repair)")
            }
            throw StorageError.directoryUnavailable(
                path: directory.path, reason: "cannot lock processes.lock: \(errnoText(code))")
        }
    }

    /// Sleeps for `duration` (a lock poll's pause; never used to wait for a result).
    private static func pause(_ duration: Duration) {
        let nanoseconds = duration.nanoseconds
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
    }

    deinit {
        close()
    }

    /// Stops counting this process (closes the file, which releases the lock). Call after LMDB
    /// has closed the store. Calling it again does nothing.
    package func close() {
        descriptor.withLock { descriptor in
            if descriptor >= 0 { Glibc.close(descriptor) }
            descriptor = -1
        }
    }

    /// Runs `body` holding the lock exclusively; nil, without running it, when another process
    /// holds it (or this handle is closed). Other processes' opens wait until `body` returns.
    package func alone<T>(_ body: () throws -> T) rethrows -> T? {
        try descriptor.withLock { descriptor -> T? in
            guard descriptor >= 0, Self.lock(descriptor, F_WRLCK, waiting: false) == 0 else { return nil }
            // Back to shared: a downgrade never conflicts, and never waits.
            defer { _ = Self.lock(descriptor, F_RDLCK, waiting: false) }
            return try body()
        }
    }

    /// True when another process has LMDB open on `directory`, as LMDB's own lock on `lock.mdb`
    /// shows. The presence lock misses some openers (a read-only open of a store without
    /// `processes.lock`, a process whose `processes.lock` was since replaced); a file swap checks
    /// this too. Call only while this process has no environment open on `directory`: closing
    /// the probe's descriptor drops this process's own `fcntl` locks on the file.
    static func lmdbOpenElsewhere(directory: StoreDirectory) -> Bool {
        let file = openat(directory.descriptor, StoreFiles.lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard file >= 0 else { return errno != ENOENT }
        defer { Glibc.close(file) }
        // Every process with the environment open holds a lock on the first byte.
        var request = flock()
        request.l_type = Int16(F_WRLCK)
        request.l_whence = Int16(SEEK_SET)
        request.l_len = 1
        guard fcntl(file, F_GETLK, &request) == 0 else { return true }
        return request.l_type != Int16(F_UNLCK)
    }

    /// Sets the lock of `descriptor` to `type` on the whole file; 0 or the errno. Waiting retries
    /// after a signal interrupts it.
    private static func lock(_ descriptor: Int32, _ type: Int32, waiting: Bool) -> Int32 {
        var request = flock()
        request.l_type = Int16(type)
        request.l_whence = Int16(SEEK_SET)
        while true {
            if fcntl(descriptor, waiting ? setLockWaiting : setLock, &request) == 0 { return 0 }
            if errno != EINTR { return errno }
        }
    }
}
