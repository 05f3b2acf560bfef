import CacheTestSupport
import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// One run of the built `cache-dump` executable as a real process: its exit status and what it
/// wrote. Output goes through files, so a large export cannot fill a pipe and stall.
struct CacheDumpRun {
    let status: Int32
    /// The signal that ended it, if one did (then `status` is the signal's number).
    let signal: Int32?
    let output: [UInt8]
    let errorText: String

    var text: String { String(decoding: output, as: UTF8.self) }
    var lines: [String] { text.split(separator: "\n").map(String.init) }

    /// Runs `cache-dump arguments…`, feeding `input` on standard input (none: an empty one).
    init(_ arguments: [String], input: [UInt8] = []) throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("cache-dump-run-\(UUID())")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let paths = ["in", "out", "err"].map { scratch.appendingPathComponent($0) }
        try Data(input).write(to: paths[0])
        FileManager.default.createFile(atPath: paths[1].path, contents: nil)
        FileManager.default.createFile(atPath: paths[2].path, contents: nil)
        let process = Process()
        process.executableURL = HelperProcess.executable("cache-dump")
        process.arguments = arguments
        process.environment = Self.environment
        process.standardInput = try FileHandle(forReadingFrom: paths[0])
        process.standardOutput = try FileHandle(forWritingTo: paths[1])
        process.standardError = try FileHandle(forWritingTo: paths[2])
        try process.run()
        process.waitUntilExit()
        status = process.terminationStatus
        signal = process.terminationReason == .uncaughtSignal ? process.terminationStatus : nil
        output = [UInt8](try Data(contentsOf: paths[1]))
        errorText = String(decoding: try Data(contentsOf: paths[2]), as: UTF8.self)
    }

    /// This process's environment, with a sanitizer build's own handling of SIGSEGV and SIGBUS
    /// turned off: its report and exit status would hide the signal that cache-dump's parent
    /// process must see from its child, as it does in a plain build.
    static let environment: [String: String] = {
        var environment = HelperProcess.withoutBacktracer(ProcessInfo.processInfo.environment)
        for name in ["TSAN_OPTIONS", "ASAN_OPTIONS"] {
            let options = environment[name].map { $0 + ":" } ?? ""
            environment[name] = options + "handle_segv=0:handle_sigbus=0"
        }
        return environment
    }()

    /// The standard output parsed as JSON.
    func json() throws -> Any {
        try JSONSerialization.jsonObject(with: Data(output))
    }

    /// Checks a failed run: the status, and one line on standard error naming the problem, with no
    /// crash trace.
    func expectFailure(
        _ expected: Int32, mentioning fragment: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(status == expected, "exit status; stderr: \(errorText)", sourceLocation: sourceLocation)
        #expect(errorText.hasPrefix("cache-dump: "), "stderr: \(errorText)", sourceLocation: sourceLocation)
        #expect(errorText.contains(fragment), "stderr: \(errorText)", sourceLocation: sourceLocation)
        #expect(
            errorText.split(separator: "\n").count == 1, "one line, no trace: \(errorText)",
            sourceLocation: sourceLocation)
    }
}

/// A cache directory written by the library for a test, with known entries.
struct SampleCache {
    let directory: TemporaryDirectory
    var path: String { directory.path }

    /// `count` entries `key0…`, values from `value(_:)`: every third compressible, every fourth
    /// expiring in an hour. Closed (flushed) on return.
    init(count: Int, label: String = #function) throws {
        directory = TemporaryDirectory(label)
        let disk = try DiskCache(directory: directory.url)
        defer { disk.close() }
        for index in 0..<count {
            try disk.setData(
                Self.value(index), forKey: "key\(index)", expiresAfter: index % 4 == 0 ? .seconds(3_600) : nil)
        }
        try disk.flush()
    }

    static func value(_ index: Int) -> [UInt8] {
        sampleBytes(count: 100 + (index * 37) % 3_000, compressible: index % 3 == 0, seed: UInt64(index))
    }

    /// Opens the cache for the test to look at or change.
    func open() throws -> DiskCache {
        try DiskCache(directory: directory.url)
    }

    /// Changes the store behind the library's back, in one write transaction: how a test makes
    /// the damage `verify` must find.
    func tamper(_ body: (DiskStore, WriteTransaction) throws -> Void) throws {
        let disk = try open()
        defer { disk.close() }
        let store = disk.store
        try store.env.writer.sync { try store.env.write { txn in try body(store, txn) } }
    }

    func remove() { directory.remove() }
}
