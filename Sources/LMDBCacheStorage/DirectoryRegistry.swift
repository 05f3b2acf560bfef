import Foundation
import Glibc

/// Identifies a directory by device and inode, so two paths to one directory (symbolic links,
/// `..`, bind mounts) find the same entry.
package struct DirectoryIdentity: Hashable, Sendable {
    package let device: UInt64
    package let inode: UInt64
}

/// Shares one object per directory per process, counted by handles.
///
/// LMDB forbids opening one environment twice in a process (its locks are per process), so the
/// object owning an ``Environment`` is created here once per directory and shared by every handle
/// that opens the same directory; the last ``release(_:close:)`` closes it.
///
/// Objects are created and closed outside the registry's lock: an open may wait (for another
/// process's compaction, for LMDB's locks), and only opens and closes of the same directory wait
/// for it. Opening cache B never waits for cache A.
package final class DirectoryRegistry<Object: AnyObject & Sendable>: @unchecked Sendable {
    private enum State {
        /// A handle is creating the object; others for the directory wait.
        case opening
        case open(Object, handles: Int)
        /// The last handle is closing the object; a new open waits, then creates a new one.
        case closing
    }

    /// Guards `states`; broadcast whenever a directory leaves `opening` or `closing`.
    private let condition = NSCondition()
    private var states: [DirectoryIdentity: State] = [:]

    package init() {}

    /// Opens and checks `directory` (``StoreDirectory``; created owner-only when missing, unless
    /// `existing`), then returns the object for it, calling `create` only if no handle has it open.
    ///
    /// While another thread of this process is opening the same directory (which may itself be
    /// waiting, for as long as its own timeout, for another process's compaction), this open
    /// waits at most `timeout`, then throws ``StorageError/storeInUse(path:operation:)``: an open's
    /// wait is bounded by its own timeout, not by a longer one another caller chose.
    package func acquire(
        directory: String, existing: Bool = false, timeout: Duration? = nil,
        create: (StoreDirectory) throws -> Object
    ) throws -> (object: Object, identity: DirectoryIdentity) {
        let opened = try StoreDirectory(path: directory, existing: existing)
        let identity = opened.identity
        let deadline = timeout.flatMap(Self.deadline)
        condition.lock()
        while true {
            switch states[identity] {
            case .open(let object, let handles):
                states[identity] = .open(object, handles: handles + 1)
                condition.unlock()
                return (object, identity)
            case .opening:
                guard let deadline, let timeout else {
                    condition.wait()
                    continue
                }
                if Date() < deadline {
                    _ = condition.wait(until: deadline)
                    continue
                }
                condition.unlock()
                throw StorageError.storeInUse(
                    path: directory,
                    operation: "open (waited \(timeout) for another open of the same store in this process)")
            case .closing:
                condition.wait()
                continue
            case nil:
                states[identity] = .opening
            }
            break
        }
        condition.unlock()
        let object: Object
        do {
            object = try create(opened)
        } catch {
            settle(identity, nil)
            throw error
        }
        settle(identity, .open(object, handles: 1))
        return (object, identity)
    }

    /// Gives back one handle; when it was the last, `close` runs (a concurrent open of the same
    /// directory waits for it; other directories do not).
    package func release(_ identity: DirectoryIdentity, close: (Object) -> Void) {
        condition.lock()
        guard case .open(let object, let handles) = states[identity] else {
            condition.unlock()
            return
        }
        if handles > 1 {
            states[identity] = .open(object, handles: handles - 1)
            condition.unlock()
            return
        }
        states[identity] = .closing
        condition.unlock()
        close(object)
        settle(identity, nil)
    }

    /// When a wait of `timeout` from now ends; nil for a timeout so long (past about three years)
    /// that it means "no limit": Foundation's timed wait cannot represent dates centuries ahead.
    private static func deadline(_ timeout: Duration) -> Date? {
        let seconds = timeout.timeInterval
        guard seconds < 100_000_000 else { return nil }
        return Date(timeIntervalSinceNow: seconds)
    }

    /// Ends an `opening` or `closing` state and wakes the opens waiting for it.
    private func settle(_ identity: DirectoryIdentity, _ state: State?) {
        condition.lock()
        states[identity] = state
        condition.broadcast()
        condition.unlock()
    }
}
