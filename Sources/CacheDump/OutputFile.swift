import Foundation
import Glibc

/// A file the tool writes for the user (`get --output`, `export --output`): always a new file,
/// owner-only, as cache contents are.
///
/// The path may be in a directory other users can write to, where one of them may have put a
/// symbolic link (to the administrator's `authorized_keys`) or a file of their own (world-
/// readable, or hard-linked elsewhere) under the name beforehand. So the last component of the
/// path is never followed and an existing file is never opened for writing:
///
/// - without `replacing`, the file is created with `O_CREAT | O_EXCL | O_NOFOLLOW`, and anything
///   already at the path (a file, a link, dangling or not) is refused with
///   ``ExitStatus/outputExists``;
/// - with `replacing` (`--force`), a new temporary file is created the same way in the same
///   directory, written, and renamed over the path by ``finish()``: a link there is replaced,
///   not followed, and another hard link of a file there keeps its old contents.
///
/// Either way the new file is checked through its descriptor (a regular file, this user's, one
/// link) and set to mode 0600 whatever the umask. Until ``finish()`` succeeds, what was created
/// is removed again when the value goes away, so a failed command leaves no partial file.
final class OutputFile {
    /// The path as the user gave it.
    let path: String
    private let directory: Int32
    /// The file's name in `directory`.
    private let name: String
    /// The temporary file's name in `directory` when replacing, else nil.
    private let temporaryName: String?
    private var descriptor: Int32
    /// The new file's device and inode once created and checked, to remove it only while the
    /// name still leads to it.
    private var identity: (device: UInt, inode: UInt)?
    private var finished = false

    /// Creates the file for `path` (or, when `replacing`, its temporary file), ready to write.
    /// (Once every property is set, a failure here runs `deinit`, which closes the directory.)
    init(_ path: String, replacing: Bool) throws {
        self.path = path
        let (folder, name) = try Self.split(path)
        self.name = name
        directory = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw Self.failure("cannot write \(path)") }
        descriptor = -1
        if replacing {
            let created = Self.createUnique(in: directory, prefix: ".cache-dump-")
            descriptor = created.descriptor
            temporaryName = created.name
            guard descriptor >= 0 else { throw Self.failure("cannot create a new file beside \(path)") }
        } else {
            temporaryName = nil
            descriptor = openat(directory, name, Self.creationFlags, 0o600)
            guard descriptor >= 0 else {
                let code = errno
                let what = Self.describe(name, in: directory)
                if code == EEXIST {
                    throw DumpFailure(
                        .outputExists,
                        "\(path) exists (\(what)); not writing over it (--force replaces it with a new file)")
                }
                throw DumpFailure(.failure, "cannot create \(path): \(String(cString: strerror(code)))")
            }
        }
        try checkNewFile()
    }

    deinit {
        if !finished { abandon() }
    }

    /// Writes all of `bytes`.
    func write(_ bytes: some ContiguousBytes) throws {
        try bytes.withUnsafeBytes { buffer in
            var done = 0
            while done < buffer.count {
                let count = Glibc.write(descriptor, buffer.baseAddress! + done, buffer.count - done)
                if count < 0 {
                    if errno == EINTR { continue }
                    throw Self.failure("cannot write \(path)")
                }
                done += count
            }
        }
    }

    /// Closes the file and, when replacing, syncs it and renames it over the path. Nothing is
    /// left behind when it fails.
    func finish() throws {
        if temporaryName != nil && fsync(descriptor) != 0 {
            throw Self.failure("cannot write \(path)")
        }
        let closed = Glibc.close(descriptor)
        descriptor = -1
        guard closed == 0 else { throw Self.failure("cannot write \(path)") }
        if let temporaryName {
            guard renameat(directory, temporaryName, directory, name) == 0 else {
                throw Self.failure("cannot replace \(path)")
            }
        }
        finished = true
        Glibc.close(directory)
    }

    /// Writes `bytes` to a new file at `path` (replacing what is there when `replacing`).
    static func write(_ bytes: [UInt8], to path: String, replacing: Bool) throws {
        let file = try OutputFile(path, replacing: replacing)
        try file.write(bytes)
        try file.finish()
    }

    // MARK: Creating

    private static let creationFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC

    /// A new file `prefix` + random letters in `directory`, created as above: its descriptor
    /// (-1 with `errno` set when it cannot be) and name.
    static func createUnique(in directory: Int32, prefix: String, flags: Int32 = O_WRONLY) -> (
        descriptor: Int32, name: String
    ) {
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        for _ in 0..<100 {
            let name = prefix + String((0..<12).map { _ in letters.randomElement()! })
            let descriptor = openat(directory, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if descriptor >= 0 || errno != EEXIST { return (descriptor, name) }
        }
        return (-1, "")
    }

    /// Checks, through the descriptor, that the file just created is what was asked for (a
    /// regular file of this user's with no other link: nobody swapped or linked it meanwhile)
    /// and makes it owner-only whatever the umask left.
    private func checkNewFile() throws {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw Self.failure("cannot check \(path)") }
        identity = (UInt(info.st_dev), UInt(info.st_ino))
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(), info.st_nlink == 1 else {
            throw DumpFailure(
                .unsafePath, "the file created for \(path) was linked or swapped by another process while being opened")
        }
        guard fchmod(descriptor, 0o600) == 0 else { throw Self.failure("cannot make \(path) owner-only") }
    }

    /// Closes and removes what was created, if the name still leads to it.
    private func abandon() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
        let created = temporaryName ?? name
        var info = stat()
        if let identity, fstatat(directory, created, &info, AT_SYMLINK_NOFOLLOW) == 0,
            (UInt(info.st_dev), UInt(info.st_ino)) == identity
        {
            unlinkat(directory, created, 0)
        }
        Glibc.close(directory)
    }

    /// The directory and the last component of `path`.
    private static func split(_ path: String) throws -> (directory: String, name: String) {
        let folder: String
        let name: String
        if let slash = path.lastIndex(of: "/") {
            folder = slash == path.startIndex ? "/" : String(path[..<slash])
            name = String(path[path.index(after: slash)...])
        } else {
            folder = "."
            name = path
        }
        guard !name.isEmpty, name != ".", name != ".." else {
            throw DumpFailure(.badInput, "\(path) does not name a file")
        }
        return (folder, name)
    }

    /// What is at `name` in `directory`, in words.
    private static func describe(_ name: String, in directory: Int32) -> String {
        var info = stat()
        guard fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return "something" }
        switch info.st_mode & S_IFMT {
        case S_IFLNK: return "a symbolic link"
        case S_IFREG: return "a file"
        case S_IFDIR: return "a directory"
        default: return "not a regular file"
        }
    }

    /// A failure naming the system's reason (errno).
    private static func failure(_ message: String) -> DumpFailure {
        DumpFailure(.failure, "\(message): \(String(cString: strerror(errno)))")
    }
}
