import Foundation

/// The `cache-test-helper` executable (or another of the package's) running as a real process.
public final class HelperProcess: @unchecked Sendable {
    private let process: Process
    private let output: Pipe
    private let errorOutput: Pipe
    /// Its stdin, when started with `input: true` (``send(_:)``, ``request(_:)``).
    private let input: Pipe?
    /// Bytes read from its stdout that do not yet form a whole line; guarded by `lock`.
    private var buffer: [UInt8] = []
    private let lock = NSLock()
    /// Held from a request's line to its answer.
    private let requestLock = NSLock()

    /// An executable of this package, built beside the test bundle by `swift build` / `swift test`.
    public static func executable(_ name: String) -> URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name)
    }

    /// `environment` with Swift's crash backtracer turned off. Some tests expect a child to die of
    /// a signal (LMDB's known faults on damaged pages); the backtracer would then run as another
    /// process holding the child's output pipes, so a parent reading them waits for it, and once,
    /// under AddressSanitizer, it never exited (a CI run hung for 20 minutes).
    public static func withoutBacktracer(_ environment: [String: String]) -> [String: String] {
        var environment = environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        return environment
    }

    /// Starts `executable` (the test helper by default) with `arguments`, and `environment`
    /// instead of this process's when given; as user and group `user` (through `setpriv`, which
    /// needs root) when given. With `input`, its stdin is a pipe the test writes to (``send(_:)``);
    /// otherwise it inherits this process's.
    public init(
        _ arguments: [String], executable: String = "cache-test-helper", environment: [String: String]? = nil,
        user: UInt32? = nil, input: Bool = false
    ) throws {
        process = Process()
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments =
                ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", Self.executable(executable).path] + arguments
        } else {
            process.executableURL = Self.executable(executable)
            process.arguments = arguments
        }
        process.environment = Self.withoutBacktracer(environment ?? ProcessInfo.processInfo.environment)
        output = Pipe()
        process.standardOutput = output
        errorOutput = Pipe()
        process.standardError = errorOutput
        if input {
            // A helper that died leaves a pipe nobody reads: a write to it must fail, not raise
            // SIGPIPE in the test process.
            signal(SIGPIPE, SIG_IGN)
            let pipe = Pipe()
            process.standardInput = pipe
            self.input = pipe
        } else {
            self.input = nil
        }
        try process.run()
    }

    /// Writes `line` and a newline to its stdin (started with `input: true`); false when it
    /// cannot (no such pipe, or the process is gone).
    @discardableResult
    public func send(_ line: String) -> Bool {
        guard let input else { return false }
        do {
            try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
            return true
        } catch {
            return false
        }
    }

    /// Sends `line` and returns the line it answers with; nil when it cannot be sent or the
    /// process's output ended. Requests from several threads take turns (each answer goes to
    /// its own request).
    public func request(_ line: String) -> String? {
        requestLock.lock()
        defer { requestLock.unlock() }
        guard send(line) else { return nil }
        return readLine()
    }

    /// Closes its stdin (the helper then sees the end of its input).
    public func closeInput() {
        try? input?.fileHandleForWriting.close()
    }

    /// The next line it prints, or nil once its output ends.
    public func readLine() -> String? {
        while true {
            lock.lock()
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                defer { buffer.removeFirst(newline + 1) }
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                lock.unlock()
                return line
            }
            lock.unlock()
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            lock.lock()
            buffer.append(contentsOf: chunk)
            lock.unlock()
        }
    }

    /// The process's identifier.
    public var processIdentifier: Int32 { process.processIdentifier }

    /// True while the process has not exited.
    public var isRunning: Bool { process.isRunning }

    /// Sends SIGKILL and waits for the process to end.
    public func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Waits for it to exit; returns its status (the signal's number when a signal ended it).
    public func wait() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Waits for it to exit; the signal that ended it, if one did.
    public func terminatingSignal() -> Int32? {
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal ? process.terminationStatus : nil
    }

    /// Everything it wrote to stderr (its error messages, or a crash's backtrace). Waits for it to exit.
    public func errorText() -> String {
        let data = errorOutput.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
