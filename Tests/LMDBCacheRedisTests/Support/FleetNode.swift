#if Redis
import CacheTestSupport
import Dispatch
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// One machine of a fleet: `cache-test-helper node` (a `Cache<String, String>` with the Redis
/// tier, on a directory of its own) in a process of its own, driven one command at a time.
///
/// Answers are checked before use: a node that dies, answers something unexpected or does not
/// answer within ``hangBound`` (a hang: it is killed) makes the call throw ``Failure`` with its
/// stderr.
final class FleetNode {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// What a get-or-load answered.
    struct Load: Equatable {
        var value: String
        /// Whether this node's loader ran.
        var loaded: Bool
        /// How long the call took, in milliseconds (as the node measured it): for a failure
        /// message, never a verdict.
        var milliseconds: Int
    }

    let name: String
    let directory: TemporaryDirectory
    /// The node's process: replaced by ``restart()``.
    private let current: Mutex<HelperProcess>
    private var process: HelperProcess { current.withLock { $0 } }
    /// The process's arguments, for ``restart()``.
    private let arguments: [String]

    /// Starts a node on a new directory with the Redis tier at 127.0.0.1:`port` and `options`
    /// (`timeout=MS`, `threshold=N`, `open=MS`, `namespace=NS`, `password=PW`, `cluster=P,P`).
    init(_ name: String, port: Int, options: [String] = []) throws {
        self.name = name
        directory = TemporaryDirectory(name)
        // A command timeout only a hang reaches, unless the test sets one: on a loaded machine a
        // lookup that times out is a miss, which would fail tests about hits.
        let timeout =
            options.contains { $0.hasPrefix("timeout=") } ? [] : ["timeout=\(hangBound.components.seconds * 1_000)"]
        arguments = ["node", directory.path, "\(port)"] + timeout + options
        current = Mutex(try Self.start(arguments, name))
    }

    /// Starts a node process with `arguments` and waits for its `ready`.
    private static func start(_ arguments: [String], _ name: String) throws -> HelperProcess {
        let process = try HelperProcess(arguments, input: true)
        let first = process.readLine()
        guard first == "ready" else {
            process.kill()
            throw Failure(description: "\(name) did not start (\(first ?? "no output")): \(process.errorText())")
        }
        return process
    }

    /// Kills the node's process (`SIGKILL`): what it had not yet sent to Redis is lost, its
    /// directory stays. A command under way fails.
    func killProcess() {
        process.kill()
    }

    /// Starts the node again on its directory with its options (after ``killProcess()``), and
    /// returns once it said `ready`.
    func restart() throws {
        let old = process
        if old.isRunning { old.kill() }
        let new = try Self.start(arguments, name)
        current.withLock { $0 = new }
    }

    deinit {
        if process.isRunning { process.kill() }
        directory.remove()
    }

    /// Sends `command` and returns its answer line.
    @discardableResult
    func ask(_ command: String) async throws -> String {
        let process = process
        guard let answer = await Self.offPool(hangingAfter: process, { process.request(command) }) else {
            if process.isRunning { process.kill() }
            throw Failure(
                description:
                    "\(name) did not answer \"\(command)\" (it died, or hung: no answer within \(hangBound)): \(process.errorText())"
            )
        }
        return answer
    }

    /// Sends `command` without reading its answer (``answer()`` reads it): to have several
    /// nodes work at once.
    func send(_ command: String) throws {
        guard process.send(command) else { throw Failure(description: "\(name) is gone: \(process.errorText())") }
    }

    /// The answer to the command ``send(_:)`` sent.
    func answer() async throws -> String {
        let process = process
        guard let line = await Self.offPool(hangingAfter: process, { process.readLine() }) else {
            throw Failure(
                description:
                    "\(name) did not answer (it died, or hung: no answer within \(hangBound)): \(process.errorText())")
        }
        return line
    }

    func put(_ key: String, _ value: String, tags: [String] = []) async throws {
        let answer = try await ask((["put", key, value] + tags).joined(separator: " "))
        guard answer == "ok" else { throw Failure(description: "\(name): put answered \(answer)") }
    }

    /// `value(forKey: key) { value }`.
    func load(_ key: String, _ value: String) async throws -> Load {
        try Self.parseLoad(try await ask("load \(key) \(value)"), name)
    }

    /// The local tiers alone (`value(forKey:)`).
    func get(_ key: String) async throws -> String? {
        let answer = try await ask("get \(key)")
        return answer == "missing" ? nil : answer
    }

    func remove(_ key: String) async throws {
        let answer = try await ask("rm \(key)")
        guard answer == "ok" else { throw Failure(description: "\(name): rm answered \(answer)") }
    }

    func removeAll(taggedWith tag: String) async throws -> Int {
        let answer = try await ask("rmtag \(tag)")
        guard let count = Int(answer) else { throw Failure(description: "\(name): rmtag answered \(answer)") }
        return count
    }

    /// The node's remote counts (`stats`): hits, misses, failures, writes, received, drops…
    func stats() async throws -> [String: Int] {
        let answer = try await ask("stats")
        var counts: [String: Int] = [:]
        for pair in answer.split(separator: " ") {
            let parts = pair.split(separator: "=")
            guard parts.count == 2, let value = Int(parts[1]) else {
                throw Failure(description: "\(name): stats answered \(answer)")
            }
            counts[String(parts[0])] = value
        }
        return counts
    }

    /// Polls `stats` until `condition` (`what`, for the hang report) holds; whether it did. Its
    /// only bound, ``hangBound``, is a hang, recorded as an issue "hung: …".
    @discardableResult
    func waitFor(
        _ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ condition: ([String: Int]) -> Bool
    ) async throws -> Bool {
        let end = ContinuousClock.now + hangBound
        while ContinuousClock.now < end {
            if condition(try await stats()) { return true }
            try await Task.sleep(for: .milliseconds(5))
        }
        if condition(try await stats()) { return true }
        Issue.record("hung: \(name): \(what) did not happen within \(hangBound)", sourceLocation: sourceLocation)
        return false
    }

    static func parseLoad(_ answer: String, _ name: String) throws -> Load {
        let parts = answer.split(separator: " ").map(String.init)
        guard parts.count == 3, parts[1].hasPrefix("loaded="), parts[2].hasPrefix("ms="),
            let milliseconds = Int(parts[2].dropFirst(3))
        else { throw Failure(description: "\(name): load answered \(answer)") }
        return Load(value: parts[0], loaded: parts[1] == "loaded=1", milliseconds: milliseconds)
    }

    /// Stops the node's process (SIGSTOP): it answers nothing, its timers stand still.
    func pause() {
        if process.isRunning { _ = Glibc.kill(process.processIdentifier, SIGSTOP) }
    }

    /// Lets a stopped node run again (SIGCONT).
    func resume() {
        if process.isRunning { _ = Glibc.kill(process.processIdentifier, SIGCONT) }
    }

    func quit() async {
        let process = process
        await Self.offPool {
            _ = process.request("quit")
            _ = process.wait()
        }
    }

    /// Runs blocking I/O (a pipe read waiting for the node) on a thread of its own: blocked on
    /// one of Swift concurrency's two threads here, it would stall every other test's tasks.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    /// ``offPool(_:)`` for a read from `process`: nil when it hung, with no answer after
    /// ``hangBound`` (the process is killed, which ends the read).
    private static func offPool<T: Sendable>(
        hangingAfter process: HelperProcess, _ body: @escaping @Sendable () -> T?
    ) async -> T? {
        let watchdog = Task.detached {
            try await Task.sleep(for: hangBound)
            process.kill()
        }
        let result = await offPool(body)
        watchdog.cancel()
        return result
    }
}
#endif
