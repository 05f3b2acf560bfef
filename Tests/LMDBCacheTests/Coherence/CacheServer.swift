import CacheTestSupport
import Foundation

/// A `Cache<String, String>` in a process of its own (`cache-test-helper serve`), driven one
/// command at a time: what the coherence tests use as "another process".
///
/// Every answer is read from the helper's output and checked before use: a helper that dies or
/// answers something unexpected makes the call throw ``Failure``, with the helper's stderr.
final class CacheServer {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// What `stats` answers: the follower's counters (``CacheStatistics``).
    struct Counters: Equatable, CustomStringConvertible {
        var received: Int
        var applied: Int
        var memoryTierDrops: Int

        var description: String { "received \(received) applied \(applied) drops \(memoryTierDrops)" }
    }

    /// The poll interval argument that leaves applying changes to `follow`: the timer's first
    /// poll is an hour away.
    static let followOnly = "3600000"

    let name: String
    private let process: HelperProcess

    /// Starts `serve` on `directory` with `poll` ("5", ``followOnly``, "off", or nil for the
    /// default) and returns once the cache is open.
    init(_ name: String, directory: URL, poll: String? = nil) throws {
        self.name = name
        process = try HelperProcess(["serve", directory.path] + (poll.map { [$0] } ?? []), input: true)
        let first = process.readLine()
        guard first == "ready" else {
            process.kill()
            throw Failure(description: "\(name) did not start (\(first ?? "no output")): \(process.errorText())")
        }
    }

    deinit {
        if process.isRunning { process.kill() }
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

    /// Sends `command`, which must answer `ok`.
    func expectOK(_ command: String) throws {
        let answer = try ask(command)
        guard answer == "ok" else { throw Failure(description: "\(name): \"\(command)\" answered \"\(answer)\"") }
    }

    func put(_ key: String, _ value: String, tags: [String] = []) throws {
        try expectOK((["put", key, value] + tags).joined(separator: " "))
    }

    /// `value(forKey:)`: memory, else disk (then promoted).
    func get(_ key: String) throws -> String? {
        let answer = try ask("get \(key)")
        return answer == "missing" ? nil : answer
    }

    /// The memory tier alone.
    func mem(_ key: String) throws -> String? {
        let answer = try ask("mem \(key)")
        return answer == "missing" ? nil : answer
    }

    func remove(_ key: String) throws { try expectOK("rm \(key)") }

    /// `removeAll(taggedWith:)`: the number of entries it removed.
    func removeAll(taggedWith tag: String) throws -> Int {
        let answer = try ask("rmtag \(tag)")
        guard let count = Int(answer) else { throw Failure(description: "\(name): rmtag answered \"\(answer)\"") }
        return count
    }

    func removeAll() throws { try expectOK("clear") }

    func flush() throws { try expectOK("flush") }

    /// `followChanges()`: every change committed before the call is applied when it returns.
    func follow() throws { try expectOK("follow") }

    func counters() throws -> Counters {
        let answer = try ask("stats")
        let numbers = answer.split(separator: " ").compactMap { Int($0) }
        guard numbers.count == 3 else { throw Failure(description: "\(name): stats answered \"\(answer)\"") }
        return Counters(received: numbers[0], applied: numbers[1], memoryTierDrops: numbers[2])
    }

    /// Reads the counters until `received` reaches `count`, and returns them: how a test waits for
    /// the follower's timer (the counter is updated after the change is applied). Throws a hang
    /// ("hung: …") after ``hangBound``, which only a hang reaches (a poll comes every few
    /// milliseconds).
    func waitForReceived(_ count: Int) throws -> Counters {
        let giveUp = ContinuousClock.now + hangBound
        while true {
            let counters = try counters()
            if counters.received >= count { return counters }
            guard ContinuousClock.now < giveUp else {
                throw Failure(
                    description:
                        "hung: \(name): \(count) changes received did not happen within \(hangBound) (stopped at \(counters))"
                )
            }
            // Pacing, so the loop leaves the helper's follower a core; the counter is what is waited on.
            usleep(500)
        }
    }

    /// Sends `quit` and waits for the helper to exit; its exit status (0: closed cleanly).
    @discardableResult
    func quit() throws -> Int32 {
        let answer = try ask("quit")
        guard answer == "bye" else { throw Failure(description: "\(name): quit answered \"\(answer)\"") }
        return process.wait()
    }
}
