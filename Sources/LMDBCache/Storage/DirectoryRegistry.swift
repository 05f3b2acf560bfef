import Foundation
import Glibc

/// The names LMDBCache uses inside a cache directory: one place for tools that must know them.
package enum StoreFiles {
    /// LMDB's data file (its name is LMDB's own).
    package static let data = "data.mdb"
    /// Regular files, which must belong to the user and not be symbolic links: LMDB's data and
    /// lock files, the process-presence lock and the space reserve.
    package static let regular = [data, "lock.mdb", "processes.lock", "space.reserve"]
    /// The folder compaction copies into; only a crash during a copy leaves it behind.
    package static let compactionFolder = "compact.tmp"
}

/// Identifies a directory by device and inode, so two paths to one directory (symbolic links,
/// `..`, bind mounts) find the same entry.
struct DirectoryIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
}

/// Shares one object per directory per process, counted by handles.
///
/// LMDB forbids opening one environment twice in a process (its locks are per process), so the
/// object owning an ``Environment`` is created here once per directory and shared by every handle
/// that opens the same directory; the last ``release(_:close:)`` closes it.
final class DirectoryRegistry<Object: AnyObject & Sendable>: Sendable {
    private struct Entry {
        let object: Object
        var handles: Int
    }

    private let entries = Locked<[DirectoryIdentity: Entry]>([:])

    init() {}

    /// Creates `directory` (owner-only) when missing, unless `existing`, then returns the object
    /// for it, calling `create` only if no handle has it open. With `existing`, a missing directory
    /// throws ``CacheError/directoryUnavailable(path:reason:)``.
    func acquire(
        directory: String, existing: Bool = false, create: (String) throws -> Object
    ) throws -> (object: Object, identity: DirectoryIdentity) {
        if existing {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue
            else {
                throw CacheError.directoryUnavailable(path: directory, reason: "no such directory")
            }
            try Self.checkOwnership(directory)
        } else {
            try Self.prepare(directory)
        }
        let identity = try Self.identity(of: directory)
        return try entries.withLock { entries in
            if var entry = entries[identity] {
                entry.handles += 1
                entries[identity] = entry
                return (entry.object, identity)
            }
            let object = try create(directory)
            entries[identity] = Entry(object: object, handles: 1)
            return (object, identity)
        }
    }

    /// Gives back one handle; when it was the last, `close` runs (under the registry lock, so a
    /// concurrent open of the same directory waits for it).
    func release(_ identity: DirectoryIdentity, close: (Object) -> Void) {
        entries.withLock { entries in
            guard var entry = entries[identity] else { return }
            entry.handles -= 1
            if entry.handles == 0 {
                entries[identity] = nil
                close(entry.object)
            } else {
                entries[identity] = entry
            }
        }
    }

    /// Makes `directory` and its missing parents, owner-only, and checks it is a usable directory.
    static func prepare(_ directory: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw CacheError.directoryUnavailable(
                    path: directory, reason: "a file that is not a directory is in the way")
            }
        } else {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
                let reason = underlying.map { errnoText(Int32($0.code)) } ?? error.localizedDescription
                throw CacheError.directoryUnavailable(path: directory, reason: "cannot create it: \(reason)")
            }
        }
        guard access(directory, R_OK | W_OK | X_OK) == 0 else {
            throw CacheError.directoryUnavailable(path: directory, reason: "not readable and writable: \(errnoText())")
        }
        try checkOwnership(directory)
    }

    /// Refuses a directory, or a store file in it, that belongs to another user, and a store file
    /// that is a symbolic link or not a regular file: another user could read or replace the
    /// cache's contents. Checked explicitly because root passes every permission check.
    static func checkOwnership(_ directory: String) throws {
        let user = geteuid()
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw CacheError.directoryUnavailable(path: directory, reason: errnoText())
        }
        guard info.st_uid == user else {
            throw CacheError.directoryUnavailable(
                path: directory,
                reason: "it belongs to uid \(info.st_uid), not to this process's uid \(user); "
                    + "a cache directory must belong to the user that opens it")
        }
        for name in StoreFiles.regular {
            let file = directory + "/" + name
            guard lstat(file, &info) == 0 else { continue }
            if info.st_mode & S_IFMT != S_IFREG {
                throw CacheError.directoryUnavailable(
                    path: directory, reason: "\(name) is a symbolic link or not a regular file; remove it")
            }
            if info.st_uid != user {
                throw CacheError.directoryUnavailable(
                    path: directory,
                    reason: "\(name) belongs to uid \(info.st_uid), not to this process's uid \(user)")
            }
        }
    }

    /// The permission bits of `directory` when they let other users in (beyond 0700), else nil.
    /// Such a directory is used as it is, with a warning: a mode the user chose is theirs to
    /// change, and the store's files inside stay owner-only.
    static func permissionsOpenToOthers(_ directory: String) -> mode_t? {
        var info = stat()
        guard stat(directory, &info) == 0 else { return nil }
        let permissions = info.st_mode & 0o7777
        return permissions & 0o077 != 0 ? permissions : nil
    }

    static func identity(of directory: String) throws -> DirectoryIdentity {
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw CacheError.directoryUnavailable(path: directory, reason: errnoText())
        }
        return DirectoryIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }
}
