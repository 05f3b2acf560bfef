import ArgumentParser
import Foundation
import LMDBCache

struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Store a value (from a file, else standard input) under a key.")

    @OptionGroup var common: CommonOptions
    @Argument(help: "The key.")
    var key: String
    @OptionGroup var keys: KeyOptions
    @Option(name: .shortAndLong, help: "Read the value from this file instead of standard input.")
    var file: String?
    @Option(name: .customLong("expires-after"), help: "Never return it after this long: 90s, 15m, 12h, 7d.")
    var expiresAfter: DurationValue?

    func run() throws {
        try reporting {
            let bytes = try keys.bytes(key)
            let value: [UInt8]
            do {
                value =
                    try file.map { [UInt8](try Data(contentsOf: URL(fileURLWithPath: $0))) }
                    ?? [UInt8](FileHandle.standardInput.readDataToEndOfFile())
            } catch {
                throw DumpFailure(.badInput, "cannot read \(file ?? "standard input"): \(error.localizedDescription)")
            }
            let disk = try CacheDirectory.openForWriting(common.path)
            defer { disk.close() }
            try disk.setData(value, forKey: bytes, expiresAfter: expiresAfter?.duration)
            try disk.flush()
            Console.write("stored \(OutputFormatting.count(value.count, "byte")) under \(displayKey(bytes))\n")
            return .success
        }
    }
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Remove entries; a key that is not there is reported (exit status 2).")

    @OptionGroup var common: CommonOptions
    @Argument(help: "The keys.")
    var keyList: [String]
    @OptionGroup var keys: KeyOptions

    func validate() throws {
        if keyList.isEmpty { throw ValidationError("name at least one key") }
    }

    func run() throws {
        try reporting {
            let all = try keyList.map(keys.bytes)
            let disk = try CacheDirectory.openForWriting(common.path)
            defer { disk.close() }
            var removed = 0
            var missing = 0
            for key in all {
                if try disk.storedEntry(forKey: key) == nil {
                    Console.error("no entry for key \(displayKey(key))")
                    missing += 1
                    continue
                }
                try disk.removeData(forKey: key)
                removed += 1
            }
            try disk.flush()
            Console.write("removed \(removed) of \(OutputFormatting.count(all.count, "entry", "entries"))\n")
            return missing > 0 ? .keyNotFound : .success
        }
    }
}

struct Clear: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove every entry (asks first unless --yes).")

    @OptionGroup var common: CommonOptions
    @Flag(name: .shortAndLong, help: "Do not ask.")
    var yes = false

    func run() throws {
        try reporting {
            let disk = try CacheDirectory.openForWriting(common.path)
            defer { disk.close() }
            let count = disk.totalCount
            if !yes {
                FileHandle.standardError.write(
                    Data(
                        "Remove all \(OutputFormatting.count(count, "entry", "entries")) from \(common.path)? [y/N] "
                            .utf8))
                let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
                guard answer == "y" || answer == "yes" else {
                    throw DumpFailure(.cancelled, "nothing removed")
                }
            }
            try disk.removeAll()
            Console.write("removed \(OutputFormatting.count(count, "entry", "entries"))\n")
            return .success
        }
    }
}

struct Trim: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove expired entries, then least recently used ones down to the limits given.")

    @OptionGroup var common: CommonOptions
    @Option(help: "Keep at most this many entries.")
    var count: Int?
    @Option(help: "Keep at most this many bytes (stored keys and records).")
    var bytes: Int?
    @Option(help: "Remove entries not used for this long: 90s, 15m, 12h, 7d.")
    var age: DurationValue?
    @Flag(help: "Remove expired entries (every trim does; alone, it is all that is done).")
    var expired = false

    func validate() throws {
        if count == nil && bytes == nil && age == nil && !expired {
            throw ValidationError("give at least one of --count, --bytes, --age, --expired")
        }
        if (count ?? 0) < 0 || (bytes ?? 0) < 0 { throw ValidationError("limits must be 0 or more") }
    }

    func run() throws {
        try reporting {
            let disk = try CacheDirectory.openForWriting(common.path)
            defer { disk.close() }
            let before = (count: disk.totalCount, bytes: disk.totalCost)
            let target = min(count ?? before.count, before.count)
            let progress = ProgressBar("trim", total: max(0, before.count - target), quiet: common.quiet)
            try PolledProgress.run(progress, done: { before.count - disk.totalCount }) {
                try disk.removeExpired()
                if let count { try disk.trim(toCount: count) }
                if let bytes { try disk.trim(toCost: bytes) }
                if let age { try disk.trim(toAge: age.duration) }
            }
            let after = (count: disk.totalCount, bytes: disk.totalCost)
            let format = OutputFormatting.self
            Console.write(
                "removed \(format.count(before.count - after.count, "entry", "entries")) "
                    + "(\(format.bytes(before.bytes - after.bytes))); now \(format.count(after.count, "entry", "entries")), "
                    + "\(format.bytes(after.bytes))\n")
            return .success
        }
    }
}

/// Runs a library call that reports no progress of its own while a second thread polls `done`
/// into `progress` (only when the bar is shown).
enum PolledProgress {
    static func run(_ progress: ProgressBar, done: @escaping @Sendable () -> Int, _ body: () throws -> Void) rethrows {
        guard progress.isShown else { return try body() }
        /// Whether the call has ended; guarded by its condition.
        final class State: @unchecked Sendable {
            let condition = NSCondition()
            var isFinished = false
        }
        let state = State()
        let exited = DispatchSemaphore(value: 0)
        Thread {
            state.condition.lock()
            while !state.isFinished {
                state.condition.unlock()
                progress.update(done())
                state.condition.lock()
                _ = state.condition.wait(until: Date().addingTimeInterval(0.1))
            }
            state.condition.unlock()
            exited.signal()
        }.start()
        defer {
            state.condition.lock()
            state.isFinished = true
            state.condition.signal()
            state.condition.unlock()
            exited.wait()
            progress.finish()
        }
        try body()
    }
}
