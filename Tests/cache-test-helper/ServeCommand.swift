import Foundation
// `followChanges()` is internal: the `follow` command is the test's way to say "every change
// committed so far is applied now" without waiting on a timer. Debug builds (what `swift build
// --build-tests` and the sanitizer builds make) compile LMDBCache for testing.
import LMDBCache
import Synchronization

/// `cache-test-helper serve DIR [POLL]`: a `Cache<String, String>` on DIR driven line by line
/// from stdin, one answer line per command, for the coherence tests across processes.
///
/// POLL is the change log's poll interval in milliseconds (default 5), or `off`
/// (``Cache/Coherence/off``: no follower at all). A test that wants to decide itself when changes
/// are applied gives a long interval (3600000) and sends `follow`.
///
/// Prints "ready" once the cache is open, then answers:
///
/// | command | does | answers |
/// |---|---|---|
/// | `put K V [TAG...]` | `insert(V, forKey: K, tags: TAGs)` | `ok` |
/// | `get K` | `value(forKey: K)` | the value, or `missing` |
/// | `mem K` | `memory.value(forKey: K)` (the memory tier alone) | the value, or `missing` |
/// | `rm K` | `removeValue(forKey: K)` | `ok` |
/// | `rmtag T` | `removeAll(taggedWith: T)` | the count it returns |
/// | `clear` | `removeAll()` | `ok` |
/// | `flush` | `flush()` | `ok`, or `error MESSAGE` |
/// | `follow` | `followChanges()` (reads the change log now, applies it) | `ok` |
/// | `stats` | | `invalidationsReceived invalidationsApplied memoryTierDrops` |
/// | `churn N` | inserts `churn0` ..< `churnN` (N changes in the log), flushing every 4,096 | `ok`, or `error MESSAGE` |
/// | `count K N EVERY` | inserts K = "1", "2" … "N", flushing after every EVERY and at the end | `ok`, or `error MESSAGE` |
/// | `hammer K THREADS` | starts THREADS threads reading K in a loop (`value(forKey:)`) | `ok` |
/// | `hammer-stop` | stops them | `reads R regressions G foreign F` (see below) |
/// | `quit` | closes the cache, exits 0 | `bye` |
///
/// A hammer thread expects K's values to be decimal numbers that only grow (what `count` writes):
/// a regression is a read that returns a smaller number than the thread read before, or nothing
/// after a number; foreign is a value that is not a number. The first regression is described on
/// stderr. The end of stdin is `quit`. Keys, values and tags are single tokens.
enum ServeCommand {
    static func run(directory: URL, arguments: ArraySlice<String>) {
        var configuration = Cache<String, String>.Configuration()
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        switch arguments.first {
        case nil: break
        case "off": configuration.coherence = .off
        case let text?:
            guard let milliseconds = Int(text), milliseconds > 0 else { fail("usage: serve DIR [pollMs|off]") }
            configuration.coherence = .init(pollInterval: .milliseconds(milliseconds))
        }
        let cache: Cache<String, String>
        do {
            cache = try Cache(directory: directory, configuration: configuration)
        } catch {
            fail("cannot open the cache: \(error)")
        }
        var hammer: Hammer?
        answer("ready")
        LineCommands.read { command, operands, line in
            switch (command, operands.count) {
            case ("put", 2...):
                cache.insert(operands[1], forKey: operands[0], tags: Set(operands.dropFirst(2)))
                answer("ok")
            case ("get", 1):
                answer(cache.value(forKey: operands[0]) ?? "missing")
            case ("mem", 1):
                answer(cache.memory.value(forKey: operands[0]) ?? "missing")
            case ("rm", 1):
                cache.removeValue(forKey: operands[0])
                answer("ok")
            case ("rmtag", 1):
                answer("\(cache.removeAll(taggedWith: operands[0]))")
            case ("clear", 0):
                cache.removeAll()
                answer("ok")
            case ("flush", 0):
                answer(outcome { try cache.flush() })
            case ("follow", 0):
                cache.followChanges()
                answer("ok")
            case ("stats", 0):
                let statistics = cache.statistics
                answer(
                    "\(statistics.invalidationsReceived) \(statistics.invalidationsApplied) \(statistics.memoryTierDrops)"
                )
            case ("churn", 1):
                guard let count = Int(operands[0]), count >= 0 else {
                    answer("error churn N")
                    return
                }
                answer(
                    outcome {
                        for index in 0..<count {
                            cache.insert("\(index)", forKey: "churn\(index)")
                            if index % 4_096 == 4_095 { try cache.flush() }
                        }
                        try cache.flush()
                    })
            case ("count", 3):
                guard let count = Int(operands[1]), let every = Int(operands[2]), count >= 0, every > 0 else {
                    answer("error count K N EVERY")
                    return
                }
                answer(
                    outcome {
                        for number in stride(from: 1, through: count, by: 1) {
                            cache.insert("\(number)", forKey: operands[0])
                            if number % every == 0 { try cache.flush() }
                        }
                        try cache.flush()
                    })
            case ("hammer", 2):
                guard hammer == nil, let threads = Int(operands[1]), threads > 0 else {
                    answer("error hammer K THREADS (one at a time)")
                    return
                }
                hammer = Hammer(cache: cache, key: operands[0], threads: threads)
                answer("ok")
            case ("hammer-stop", 0):
                guard let running = hammer else {
                    answer("error no hammer")
                    return
                }
                hammer = nil
                let tally = running.stop()
                answer("reads \(tally.reads) regressions \(tally.regressions) foreign \(tally.foreign)")
            case ("quit", 0):
                _ = hammer?.stop()
                cache.close()
                answer("bye")
                exit(0)
            default:
                answer("error unknown command \(line)")
            }
        }
        _ = hammer?.stop()
        cache.close()
        exit(0)
    }

    static func answer(_ line: String) { LineCommands.answer(line) }

    /// "ok", or "error MESSAGE" (on one line) when `body` throws.
    static func outcome(_ body: () throws -> Void) -> String {
        do {
            try body()
            return "ok"
        } catch {
            return "error \(error)".replacingOccurrences(of: "\n", with: " ")
        }
    }
}

/// Threads reading one key in a loop until stopped, each checking that the numbers it reads
/// never go back (see ``ServeCommand``).
final class Hammer: Sendable {
    struct Tally: Sendable {
        var reads = 0
        var regressions = 0
        var foreign = 0
    }

    private let stopping = Atomic<Bool>(false)
    /// The threads' summed tally, behind an NSLock (a pthread mutex): ThreadSanitizer does not see
    /// the futex hand-off of a contended `Mutex` as synchronisation, and reported a race on it.
    private let tallyLock = NSLock()
    nonisolated(unsafe) private var total = Tally()
    private let finished = DispatchSemaphore(value: 0)
    private let threads: Int

    init(cache: Cache<String, String>, key: String, threads: Int) {
        self.threads = threads
        for _ in 0..<threads {
            Thread.detachNewThread { [self] in
                var local = Tally()
                // -1: nothing read yet; 0: read "missing" before any number.
                var newest = -1
                while !stopping.load(ordering: .relaxed) {
                    let read = cache.value(forKey: key)
                    local.reads += 1
                    guard let read else {
                        if newest > 0 {
                            if local.regressions == 0 { report("missing after \(newest)") }
                            local.regressions += 1
                        } else {
                            newest = 0
                        }
                        continue
                    }
                    guard let number = Int(read), number > 0 else {
                        local.foreign += 1
                        continue
                    }
                    if number < newest {
                        if local.regressions == 0 { report("\(number) after \(newest)") }
                        local.regressions += 1
                    } else {
                        newest = number
                    }
                }
                tallyLock.withLock {
                    total.reads += local.reads
                    total.regressions += local.regressions
                    total.foreign += local.foreign
                }
                finished.signal()
            }
        }
    }

    /// Stops the threads, waits for them and returns what they found.
    func stop() -> Tally {
        stopping.store(true, ordering: .relaxed)
        for _ in 0..<threads { finished.wait() }
        return tallyLock.withLock { total }
    }

    private func report(_ text: String) {
        FileHandle.standardError.write(Data("cache-test-helper: hammer read \(text)\n".utf8))
    }
}
