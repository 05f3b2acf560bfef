import Glibc

/// A cache directory opened once, checked through its descriptor, and reached only through it.
///
/// Checking a directory by path and then opening its files by path again can be raced: a user
/// who can rename entries in a parent swaps the directory between the check and the open, and
/// the process then maps an attacker's store or writes LMDB's lock header through a planted
/// symbolic link. So the directory is opened once (`O_NOFOLLOW`), its descriptor is checked with
/// `fstat`, its store files with `fstatat(AT_SYMLINK_NOFOLLOW)`, and every later lookup (LMDB's
/// `mdb_env_open`, the library's own files, compaction's rename) goes through
/// ``resolved``, `/proc/self/fd/N`, which names the opened directory whatever is renamed since.
///
/// Refused, with ``StorageError/directoryUnavailable(path:reason:)``:
/// - a directory that belongs to another user, or that other users may write (they could plant
///   or replace its files);
/// - a parent directory (of the path as given, and of the directory a symbolic link leads to)
///   that belongs to a user other than this one or root, or that others may write without the
///   sticky bit (they could swap the cache directory itself);
/// - a symbolic link as the cache directory that belongs to a user other than this one or root;
/// - a store file that is a symbolic link, not a regular file, another user's, or has more than
///   one link (another name for it could be a file the process would never write on purpose).
package final class StoreDirectory: Sendable {
    /// The directory as the caller named it: for messages only, never looked up again.
    package let path: String
    /// The open directory (`O_RDONLY | O_DIRECTORY | O_CLOEXEC`), closed on deinit.
    package let descriptor: Int32
    package let identity: DirectoryIdentity

    /// `/proc/self/fd/<descriptor>`: a path that leads to the opened directory for as long as it
    /// stays open, whatever happens to the name it was opened by.
    package var resolved: String { "/proc/self/fd/\(descriptor)" }

    /// The path of the store file `name` inside the opened directory.
    package func file(_ name: String) -> String { resolved + "/" + name }

    /// Opens `path`, creating it and its missing parents owner-only first unless `existing`, and
    /// runs every check above. With `existing`, a missing directory throws.
    package init(path: String, existing: Bool) throws {
        self.path = path
        if !existing { try Self.makeDirectories(path) }
        let (parentPath, name) = Self.split(path)
        // The parent as named: whoever may write it could swap the cache directory. Opened with
        // O_PATH: looking a name up and fstat need only search permission, as a path lookup does,
        // so a parent the user may search but not list (mode 0711) is no reason to refuse.
        let parent = open(parentPath, Self.pathOnly | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else {
            throw StorageError.directoryUnavailable(
                path: path, reason: errno == ENOENT ? "no such directory" : errnoText())
        }
        defer { close(parent) }
        try Self.checkParent(parent, named: parentPath, of: path)
        var link = stat()
        guard fstatat(parent, name, &link, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw StorageError.directoryUnavailable(
                path: path, reason: existing && errno == ENOENT ? "no such directory" : errnoText())
        }
        let isLink = link.st_mode & S_IFMT == S_IFLNK
        if isLink && link.st_uid != geteuid() && link.st_uid != 0 {
            throw StorageError.directoryUnavailable(
                path: path,
                reason: "it is a symbolic link that belongs to uid \(link.st_uid), not to this process's uid "
                    + "\(geteuid()) or root; another user chose where it leads")
        }
        // Only a link this user or root made is followed (the parent, checked above, is not
        // writable by others, so the link cannot be swapped either).
        let follow = isLink ? 0 : O_NOFOLLOW
        let opened = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | follow)
        guard opened >= 0 else {
            let reason = errno == ENOTDIR ? "a file that is not a directory is in the way" : errnoText()
            throw StorageError.directoryUnavailable(path: path, reason: reason)
        }
        // Every check runs on the local descriptor, and the stored properties are set only once
        // they all passed: a class whose properties are all set runs `deinit` when its init
        // throws, and closing `opened` both here and there closed a number another thread may
        // already have been given again.
        let info: stat
        do {
            info = try Self.checkOpened(opened, path: path, followedLink: follow == 0)
        } catch {
            close(opened)
            throw error
        }
        descriptor = opened
        identity = DirectoryIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Runs every check on the directory just opened as `opened`; its `fstat` when they pass.
    private static func checkOpened(_ opened: Int32, path: String, followedLink: Bool) throws -> stat {
        var info = stat()
        guard fstat(opened, &info) == 0 else {
            throw StorageError.directoryUnavailable(path: path, reason: errnoText())
        }
        try checkDirectory(info, path: path)
        if followedLink {
            // The parent of where the link leads must be as safe as the named one.
            let realParent = openat(opened, "..", pathOnly | O_DIRECTORY | O_CLOEXEC)
            guard realParent >= 0 else {
                throw StorageError.directoryUnavailable(path: path, reason: "cannot open its parent: \(errnoText())")
            }
            defer { close(realParent) }
            try checkParent(realParent, named: "(the parent of where \(path) leads)", of: path)
        }
        try checkStoreFiles(in: opened, path: path)
        return info
    }

    /// `O_PATH` (Linux's value on every architecture Swift runs on; Glibc's module does not export it).
    private static let pathOnly: Int32 = 0o10_000_000

    deinit {
        close(descriptor)
    }

    /// Refuses a store file that is a symbolic link or not a regular file, belongs to another
    /// user, or has another name (a hard link). Missing files pass.
    func checkStoreFiles() throws {
        try Self.checkStoreFiles(in: descriptor, path: path)
    }

    private static func checkStoreFiles(in descriptor: Int32, path: String) throws {
        let user = geteuid()
        for name in StoreFiles.regular {
            var info = stat()
            guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if info.st_mode & S_IFMT != S_IFREG {
                throw StorageError.directoryUnavailable(
                    path: path, reason: "\(name) is a symbolic link or not a regular file; remove it")
            }
            if info.st_uid != user {
                throw StorageError.directoryUnavailable(
                    path: path, reason: "\(name) belongs to uid \(info.st_uid), not to this process's uid \(user)")
            }
            if info.st_nlink != 1 {
                throw StorageError.directoryUnavailable(
                    path: path,
                    reason: "\(name) has \(info.st_nlink) links; a store file must have no other name, remove it")
            }
        }
    }

    /// The permission bits of the directory when they let other users in (beyond 0700), else nil.
    /// Such a directory (readable, never writable, by others) is used as it is, with a warning: a
    /// mode the user chose is theirs to change, and the store's files stay owner-only.
    package var permissionsOpenToOthers: mode_t? {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        let permissions = info.st_mode & 0o7777
        return permissions & 0o077 != 0 ? permissions : nil
    }

    /// The opened directory is this user's, and no other user may replace its files.
    private static func checkDirectory(_ info: stat, path: String) throws {
        let user = geteuid()
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw StorageError.directoryUnavailable(path: path, reason: "a file that is not a directory is in the way")
        }
        guard info.st_uid == user else {
            throw StorageError.directoryUnavailable(
                path: path,
                reason: "it belongs to uid \(info.st_uid), not to this process's uid \(user); "
                    + "a cache directory must belong to the user that opens it")
        }
        if info.st_mode & 0o022 != 0 {
            throw StorageError.directoryUnavailable(
                path: path,
                reason: "other users may write it (mode \(String(info.st_mode & 0o7777, radix: 8))) and could "
                    + "replace the store's files; chmod go-w it")
        }
    }

    /// Refuses a parent whose owner is another user (not root), or that others may write without
    /// the sticky bit: either could rename the cache directory and put another in its place.
    private static func checkParent(_ parent: Int32, named parentPath: String, of path: String) throws {
        var info = stat()
        guard fstat(parent, &info) == 0 else {
            throw StorageError.directoryUnavailable(path: path, reason: "cannot stat its parent: \(errnoText())")
        }
        if info.st_uid != geteuid() && info.st_uid != 0 {
            throw StorageError.directoryUnavailable(
                path: path,
                reason: "its parent \(parentPath) belongs to uid \(info.st_uid), who could replace the cache "
                    + "directory; put the cache in a directory of this user or root")
        }
        if writableByOthers(info) {
            throw StorageError.directoryUnavailable(
                path: path,
                reason: "other users may write its parent \(parentPath) (mode "
                    + "\(String(info.st_mode & 0o7777, radix: 8))) and could replace the cache directory; "
                    + "chmod go-w or +t the parent")
        }
    }

    /// Group or others may write, and the sticky bit does not keep them to their own entries.
    private static func writableByOthers(_ info: stat) -> Bool {
        info.st_mode & 0o022 != 0 && info.st_mode & S_ISVTX == 0
    }

    /// The parent path and the last component of `path` (absolute and standardized by callers).
    private static func split(_ path: String) -> (parent: String, name: String) {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = trimmed.lastIndex(of: "/") else { return (".", trimmed) }
        let parent = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        let name = String(trimmed[trimmed.index(after: slash)...])
        return (parent, name.isEmpty ? "." : name)
    }

    /// Creates `path` and its missing parents with mode 0700 (never wider, whatever the umask).
    private static func makeDirectories(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) == 0 { continue }
            let failure = errno
            var info = stat()
            if stat(prefix, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR { continue }
            let reason = failure == EEXIST ? "\(prefix) is not a directory" : errnoText(failure)
            throw StorageError.directoryUnavailable(path: path, reason: "cannot create it: \(reason)")
        }
    }
}
