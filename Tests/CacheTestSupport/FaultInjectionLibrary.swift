import Foundation

/// The fault-injection interposer (`Tests/FaultInjection/inject-faults.c`), compiled with the
/// system's C compiler into a temporary directory, for `LD_PRELOAD` into a helper process.
///
/// It stays out of the library entirely: only a process started with ``environment(call:error:occurrence:)``
/// in its environment loads it.
public enum FaultInjectionLibrary {
    /// An LMDB or system call the interposer can make fail.
    public enum Call: String, Sendable, CaseIterable {
        case setMapSize = "mdb_env_set_mapsize"
        case transactionCommit = "mdb_txn_commit"
        case transactionBegin = "mdb_txn_begin"
        case environmentCopy = "mdb_env_copy2"
        case rename
        case fdatasync
        case statvfs
    }

    /// Why building the interposer failed.
    public struct BuildFailure: Error, CustomStringConvertible {
        public let description: String
    }

    private static let built = Result<String, any Error> { try build() }

    /// The path of the compiled interposer (built once per test process).
    public static func path() throws -> String {
        try built.get()
    }

    /// The environment a helper process needs to fail `call` with `error` (an errno value or an
    /// LMDB code) at its `occurrence`th call ("N"), or from then on ("N+").
    public static func environment(call: Call, error: Int32, occurrence: String) throws -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = try path()
        environment["LMDBCACHE_FAULT_CALL"] = call.rawValue
        environment["LMDBCACHE_FAULT_ERROR"] = "\(error)"
        environment["LMDBCACHE_FAULT_OCCURRENCE"] = occurrence
        return environment
    }

    /// The environment a helper process needs to abort on a `close` of a descriptor that is not
    /// open (a descriptor closed twice), failing nothing.
    public static func abortingOnBadClose() throws -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = try path()
        environment["LMDBCACHE_ABORT_ON_BAD_CLOSE"] = "1"
        return environment
    }

    private static func build() throws -> String {
        // Tests/CacheTestSupport/FaultInjectionLibrary.swift -> Tests/FaultInjection/inject-faults.c
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FaultInjection/inject-faults.c").path
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("lmdbcache-inject-faults-\(UUID())")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw BuildFailure(description: "cannot create \(folder.path): \(error)")
        }
        let library = folder.appendingPathComponent("inject-faults.so").path
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        compiler.arguments = ["cc", "-shared", "-fPIC", "-O1", "-Wall", "-o", library, source, "-ldl"]
        let errors = Pipe()
        compiler.standardError = errors
        do {
            try compiler.run()
        } catch {
            throw BuildFailure(description: "cannot run cc: \(error)")
        }
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        compiler.waitUntilExit()
        guard compiler.terminationStatus == 0 else {
            throw BuildFailure(description: "cc failed on \(source): \(text)")
        }
        return library
    }
}
