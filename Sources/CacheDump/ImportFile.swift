import Foundation
import Glibc

/// The export file `import` reads twice, a line at a time: once to check every line, then again
/// to write the entries, so that neither pass holds more than one line in memory.
///
/// A regular file is read again from its start; it must be the same (size, modification time)
/// when the second pass begins and ends. Standard input (`-`), a pipe or anything else that cannot
/// be read twice is copied, while the first pass reads it, into a temporary file only this
/// process can reach: created owner-only with `O_EXCL` in `$TMPDIR` (else `/tmp`) and unlinked at
/// once. The second pass reads the copy; it takes as much disk space as the input.
final class ImportFile {
    /// The file as messages name it: its path, or "standard input".
    let name: String
    private let source: Int32
    private let ownsSource: Bool
    /// The copy of a source that cannot be read twice, or -1.
    private var spool: Int32 = -1
    /// A regular file's size and modification time when opened.
    private var fingerprint: [Int]?

    /// Opens `path` (`-` for standard input).
    init(_ path: String) throws {
        if path == "-" {
            name = "standard input"
            source = STDIN_FILENO
            ownsSource = false
        } else {
            name = path
            source = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            ownsSource = source >= 0
            guard source >= 0 else {
                throw DumpFailure(.badInput, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
        }
        var info = stat()
        guard fstat(source, &info) == 0 else {
            throw DumpFailure(.badInput, "cannot read \(name): \(String(cString: strerror(errno)))")
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            throw DumpFailure(.badInput, "cannot read \(name): it is a directory")
        }
        if path != "-" && info.st_mode & S_IFMT == S_IFREG {
            fingerprint = Self.fingerprint(info)
        } else {
            spool = try Self.createSpool(copying: name)
        }
    }

    deinit {
        if ownsSource { Glibc.close(source) }
        if spool >= 0 { Glibc.close(spool) }
    }

    /// The lines for the checking pass (copied to the temporary file when there is one).
    func checkingLines() -> LineReader {
        LineReader(descriptor: source, limit: ExportFormat.maxLineLength, copyingTo: spool)
    }

    /// The lines again, from the start, for the writing pass. Throws when a regular file changed
    /// since it was opened.
    func writingLines() throws -> LineReader {
        let descriptor = spool >= 0 ? spool : source
        guard isUnchanged else {
            throw DumpFailure(.badInput, "\(name) changed while it was being checked; nothing was imported")
        }
        guard lseek(descriptor, 0, SEEK_SET) == 0 else {
            throw DumpFailure(.failure, "cannot read \(name) again: \(String(cString: strerror(errno)))")
        }
        return LineReader(descriptor: descriptor, limit: ExportFormat.maxLineLength)
    }

    /// False when a regular file's size or modification time is not what it was when opened.
    var isUnchanged: Bool {
        guard let fingerprint else { return true }
        var info = stat()
        return fstat(source, &info) == 0 && Self.fingerprint(info) == fingerprint
    }

    private static func fingerprint(_ info: stat) -> [Int] {
        [Int(info.st_size), Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec), Int(info.st_ino)]
    }

    /// An owner-only temporary file with no name left, open for reading and writing.
    private static func createSpool(copying source: String) throws -> Int32 {
        let environment = ProcessInfo.processInfo.environment["TMPDIR"] ?? ""
        let folder = environment.isEmpty ? "/tmp" : environment
        func failure(_ reason: String = String(cString: strerror(errno))) -> DumpFailure {
            DumpFailure(.failure, "cannot make a private temporary copy of \(source) in \(folder): \(reason)")
        }
        let directory = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw failure() }
        defer { Glibc.close(directory) }
        let (descriptor, name) = OutputFile.createUnique(in: directory, prefix: "cache-dump-import-", flags: O_RDWR)
        guard descriptor >= 0 else { throw failure() }
        var problem: DumpFailure?
        var info = stat()
        if unlinkat(directory, name, 0) != 0 || fstat(descriptor, &info) != 0 || fchmod(descriptor, 0o600) != 0 {
            problem = failure()
        } else if info.st_mode & S_IFMT != S_IFREG || info.st_uid != geteuid() || info.st_nlink != 0 {
            // Unlinked, it has no link left, unless another process linked it in the moment it
            // had a name: then what is copied into it would not be this process's alone.
            problem = failure("another process linked or replaced it")
        }
        if let problem {
            Glibc.close(descriptor)
            throw problem
        }
        return descriptor
    }
}
