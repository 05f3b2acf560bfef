import ArgumentParser
import Foundation
import LMDBCache

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
            let disk = try TargetDirectory.openForWriting(common.path)
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
