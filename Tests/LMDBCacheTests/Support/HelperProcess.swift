import Foundation

@testable import LMDBCache

/// The `cache-test-helper` executable running as a real second process.
final class HelperProcess: Sendable {
    private let process: Process
    private let output: Pipe
    private let errorOutput: Pipe
    /// Bytes read from its stdout that do not yet form a whole line.
    private let buffer = Locked<[UInt8]>([])

    /// The helper binary, built beside the test bundle by `swift build` / `swift test`.
    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("cache-test-helper")
    }

    init(_ arguments: [String]) throws {
        process = Process()
        process.executableURL = Self.executable
        process.arguments = arguments
        output = Pipe()
        process.standardOutput = output
        errorOutput = Pipe()
        process.standardError = errorOutput
        try process.run()
    }

    /// The next line it prints, or nil once its output ends.
    func readLine() -> String? {
        while true {
            let line = buffer.withLock { bytes -> String? in
                guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
                defer { bytes.removeFirst(newline + 1) }
                return String(decoding: bytes[..<newline], as: UTF8.self)
            }
            if let line { return line }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.withLock { $0.append(contentsOf: chunk) }
        }
    }

    /// Its process id.
    var processIdentifier: Int32 { process.processIdentifier }

    /// Sends SIGKILL and waits for the process to end.
    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Waits for it to exit; returns its status (the signal's number when a signal ended it).
    func wait() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Waits for it to exit; the signal that ended it, if one did.
    func terminatingSignal() -> Int32? {
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal ? process.terminationStatus : nil
    }

    /// Everything it wrote to stderr (its error messages, or a crash's backtrace). Waits for it to exit.
    func errorText() -> String {
        let data = errorOutput.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
