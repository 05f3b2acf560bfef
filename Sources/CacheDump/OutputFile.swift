import Foundation

/// Files the tool writes for the user (`get --output`, `export --output`): created owner-only,
/// as cache contents are.
enum OutputFile {
    static func open(_ path: String) throws -> FileHandle {
        let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw DumpFailure(.failure, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    static func write(_ bytes: [UInt8], to path: String) throws {
        let handle = try open(path)
        try handle.write(contentsOf: bytes)
        try handle.close()
    }
}
