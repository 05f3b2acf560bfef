import CLMDB
import Glibc

/// One slot of LMDB's reader table (in `lock.mdb`): a process that has, or had, a read
/// transaction open.
package struct ReaderSlot: Sendable, Equatable {
    /// The process holding the slot, as the slot records it.
    package var processID: Int32
    /// The thread, as LMDB prints it (hexadecimal).
    package var thread: String
    /// The snapshot the slot reads, or nil when its transaction is idle (reset).
    package var transaction: Int?
    /// Whether the process that took the slot still runs; `mdb_reader_check` frees stale slots.
    package var state: ReaderState
    /// The process holding LMDB's lock on the byte at offset ``processID`` of `lock.mdb`, as this
    /// process sees it (`F_GETLK`); nil when none does or it could not be asked. For a live reader
    /// in this process's pid namespace it is ``processID`` itself: only then is the process that
    /// ``processID`` names known to be the reader, not another program given a dead reader's pid.
    package var lockHolder: Int32?
}

/// Whether a reader slot's process still runs.
package enum ReaderState: String, Sendable {
    /// It holds LMDB's per-process lock in `lock.mdb` (or is this process).
    case alive
    /// No process holds its lock (or, without the lock file, no process has its pid): the reader
    /// is gone, whatever program runs under that pid now.
    case stale
    /// It could not be told: the lock could not be asked and a process with that pid exists
    /// that this one may not signal (another user's), or the slot holds no valid pid.
    case unknown
}

// LMDB's reader table: listing its slots, and clearing those of processes that died.
extension Environment {
    /// Every reader-table slot in use (this process's idle pooled transactions included), with
    /// whether its process still runs, decided as LMDB's `mdb_reader_check` decides it.
    ///
    /// A process with a read transaction on the store holds an `fcntl` write lock on the byte of
    /// `lock.mdb` at the offset of its pid, from its first read transaction until it closes the
    /// environment, and the kernel drops the lock when the process dies. So the slot of a reader
    /// killed with SIGKILL shows stale even once its pid belongs to another program, which
    /// `kill(pid, 0)` would call alive (or, for another user's program, fail with EPERM).
    /// `F_GETLK` does not report this process's own locks: its own slots count as alive. Only
    /// when `lock.mdb` cannot be opened does `kill(pid, 0)` decide: no such process is stale, one
    /// this process may signal is alive, and EPERM is unknown.
    package func readerSlots() throws -> [ReaderSlot] {
        final class Lines {
            var lines: [String] = []
        }
        let collected = Lines()
        try withEnvironmentPointer { env in
            _ = mdb_reader_list(
                env,
                { message, context in
                    guard let message, let context else { return 0 }
                    Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue().lines.append(String(cString: message))
                    return 0
                }, Unmanaged.passUnretained(collected).toOpaque())
        }
        // A header line ("pid thread txnid"), then "pid thread txnid|-" per slot, or "(no active readers)".
        let slots = collected.lines.compactMap { line -> (pid: Int32, thread: String, transaction: Int?)? in
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\n" })
            guard fields.count == 3, let pid = Int32(fields[0]) else { return nil }
            return (pid, String(fields[1]), Int(fields[2]))
        }
        guard !slots.isEmpty else { return [] }
        return withLockProbe { probe in
            slots.map { slot in
                let (state, holder) = Self.readerState(slot.pid, probe: probe)
                return ReaderSlot(
                    processID: slot.pid, thread: slot.thread, transaction: slot.transaction, state: state,
                    lockHolder: holder)
            }
        }
    }

    /// Whether process `pid` still reads the store, and which process holds its lock. `probe` is
    /// a descriptor of `lock.mdb`, or -1.
    private static func readerState(_ pid: Int32, probe: Int32) -> (ReaderState, Int32?) {
        if pid == getpid() { return (.alive, pid) }
        // Not a pid the kernel hands out: never given to kill(), where 0 and negative numbers
        // name process groups.
        guard pid > 0 else { return (.unknown, nil) }
        if probe >= 0 {
            var request = flock()
            request.l_type = Int16(F_WRLCK)
            request.l_whence = Int16(SEEK_SET)
            request.l_start = off_t(pid)
            request.l_len = 1
            while fcntl(probe, F_GETLK, &request) != 0 {
                // As LMDB takes it: an error means the process may be alive.
                if errno != EINTR { return (.unknown, nil) }
            }
            if request.l_type == Int16(F_UNLCK) { return (.stale, nil) }
            return (.alive, request.l_pid)
        }
        if kill(pid, 0) == 0 { return (.alive, nil) }
        return (errno == ESRCH ? .stale : .unknown, nil)
    }

    /// Runs `body` with a descriptor of `lock.mdb` that `fcntl(F_GETLK)` can ask about LMDB's
    /// locks (opened on first use and kept until ``close()``), or -1 when it cannot be opened.
    func withLockProbe<T>(_ body: (Int32) throws -> T) rethrows -> T {
        try lockProbe.withLock { probe in
            if probe == nil {
                // Reading is enough: F_GETLK asks about locks without taking one.
                probe = openat(directory.descriptor, StoreFiles.lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            }
            return try body(probe ?? -1)
        }
    }

    /// Clears reader slots left by processes that died; returns how many were cleared.
    @discardableResult
    package func clearStaleReaders() -> Int {
        var dead: Int32 = 0
        resizeLock.withSharedLock { if unusable == nil { _ = mdb_reader_check(env, &dead) } }
        return Int(dead)
    }

    /// Clears stale reader slots, logging any it cleared. A process killed during a read leaves
    /// its slot pinning the snapshot it read, and LMDB then reuses no page freed since: the file
    /// grows. Done by every trim pass and before the map grows, not only at open.
    package func clearStaleReaders(before occasion: String) {
        let cleared = clearStaleReaders()
        if cleared > 0 {
            logger.info(
                "LMDBCache cleared stale reader slots",
                metadata: ["path": .escaped(path), "slots": "\(cleared)", "before": "\(occasion)"])
        }
    }
}
