#if Redis
import CacheTestSupport
import Foundation

/// One machine of a fleet: `cache-test-helper node` (a `Cache<String, String>` with the Redis
/// tier, on a directory of its own) in a process of its own, driven one command at a time.
///
/// Answers are checked before use: a node that dies or answers something unexpected makes the
/// call throw ``Failure`` with its stderr.
final class FleetNode {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// What a get-or-load answered.
    struct Load: Equatable {
        var value: String
        /// Whether this node's loader ran.
        var loaded: Bool
        /// How long the call took, in milliseconds (as the node measured it).
        var milliseconds: Int
    }

    let name: String
    let directory: TemporaryDirectory
    private let process: HelperProcess

    /// Starts a node on a new directory with the Redis tier at 127.0.0.1:`port` and `options`
    /// (`timeout=MS`, `threshold=N`, `open=MS`, `namespace=NS`, `password=PW`, `cluster=P,P`).
    init(_ name: String, port: Int, options: [String] = []) throws {
        self.name = name
        directory = TemporaryDirectory(name)
        // A generous command timeout unless the test sets one: on a loaded machine a lookup that
        // times out is a miss, which would fail tests about hits.
        let timeout = options.contains { $0.hasPrefix("timeout=") } ? [] : ["timeout=5000"]
        process = try HelperProcess(["node", directory.path, "\(port)"] + timeout + options, input: true)
        let first = process.readLine()
        guard first == "ready" else {
            process.kill()
            throw Failure(description: "\(name) did not start (\(first ?? "no output")): \(process.errorText())")
        }
    }

    deinit {
        if process.isRunning { process.kill() }
        directory.remove()
    }

    /// Sends `command` and returns its answer line.
    @discardableResult
    func ask(_ command: String) throws -> String {
        guard let answer = process.request(command) else {
            if process.isRunning { process.kill() }
            throw Failure(description: "\(name) did not answer \"\(command)\": \(process.errorText())")
        }
        return answer
    }

    /// Sends `command` without reading its answer (``answer()`` reads it): to have several
    /// nodes work at once.
    func send(_ command: String) throws {
        guard process.send(command) else { throw Failure(description: "\(name) is gone: \(process.errorText())") }
    }

    /// The answer to the command ``send(_:)`` sent.
    func answer() throws -> String {
        guard let line = process.readLine() else {
            throw Failure(description: "\(name) did not answer: \(process.errorText())")
        }
        return line
    }

    func put(_ key: String, _ value: String, tags: [String] = []) throws {
        let answer = try ask((["put", key, value] + tags).joined(separator: " "))
        guard answer == "ok" else { throw Failure(description: "\(name): put answered \(answer)") }
    }

    /// `value(forKey: key) { value }`.
    func load(_ key: String, _ value: String) throws -> Load {
        try Self.parseLoad(try ask("load \(key) \(value)"), name)
    }

    /// The local tiers alone (`value(forKey:)`).
    func get(_ key: String) throws -> String? {
        let answer = try ask("get \(key)")
        return answer == "missing" ? nil : answer
    }

    func remove(_ key: String) throws {
        let answer = try ask("rm \(key)")
        guard answer == "ok" else { throw Failure(description: "\(name): rm answered \(answer)") }
    }

    func removeAll(taggedWith tag: String) throws -> Int {
        let answer = try ask("rmtag \(tag)")
        guard let count = Int(answer) else { throw Failure(description: "\(name): rmtag answered \(answer)") }
        return count
    }

    /// The node's remote counts (`stats`): hits, misses, failures, writes, received, drops…
    func stats() throws -> [String: Int] {
        let answer = try ask("stats")
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

    /// Polls `stats` until `condition` holds (for at most a generous deadline); whether it did.
    func waitFor(_ condition: ([String: Int]) -> Bool) throws -> Bool {
        let end = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < end {
            if condition(try stats()) { return true }
            usleep(5_000)
        }
        return condition(try stats())
    }

    static func parseLoad(_ answer: String, _ name: String) throws -> Load {
        let parts = answer.split(separator: " ").map(String.init)
        guard parts.count == 3, parts[1].hasPrefix("loaded="), parts[2].hasPrefix("ms="),
            let milliseconds = Int(parts[2].dropFirst(3))
        else { throw Failure(description: "\(name): load answered \(answer)") }
        return Load(value: parts[0], loaded: parts[1] == "loaded=1", milliseconds: milliseconds)
    }

    func quit() {
        _ = process.request("quit")
        _ = process.wait()
    }
}
#endif
