import ArgumentParser
import Foundation
import LMDBCache

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write every live entry as JSON Lines (key and value base64, timestamps, expiry).",
        discussion: """
            Expired entries are left out. A damaged record is skipped and reported; the export then \
            ends with exit status 4.
            """)

    @OptionGroup var common: CommonOptions
    @Option(
        name: .shortAndLong,
        help: "Write to this new file (owner-only) instead of standard output; an existing one is refused.")
    var output: String?
    @Flag(help: "With --output: replace what is there with a new file (a link there is replaced, not followed).")
    var force = false

    func validate() throws {
        if force && output == nil { throw ValidationError("--force goes with --output") }
    }

    func run() throws {
        try reporting {
            let disk = try TargetDirectory.openForReading(common.path)
            defer { disk.close() }
            // A file given with --output is removed again if the export fails before the end.
            let file = try output.map { try OutputFile($0, replacing: force) }
            func emit(_ text: String) throws {
                if let file {
                    try file.write(Data(text.utf8))
                } else {
                    try FileHandle.standardOutput.write(contentsOf: Data(text.utf8))
                }
            }
            let progress = ProgressBar("export", total: disk.totalCount, quiet: common.quiet)
            defer { progress.finish() }
            let now = UInt64(Date().timeIntervalSince1970 * 1_000)
            var text = ExportFormat.header + "\n"
            var exported = 0
            var seen = 0
            var damaged = 0
            var longKeys = 0
            var after: [UInt8]?
            // One read transaction per thousand entries: a long export never pins old pages long.
            while true {
                let chunk = try disk.storedEntries(after: after, limit: 1_000, withValues: true)
                guard let last = chunk.last else { break }
                after = last.storedKey
                for entry in chunk {
                    seen += 1
                    if let damage = entry.damage {
                        Console.error("skipped the damaged record \(displayKey(entry.key)): \(damage)")
                        damaged += 1
                        continue
                    }
                    if entry.isExpired(at: now) { continue }
                    if entry.key.count > ExportFormat.maxKeyLength { longKeys += 1 }
                    text +=
                        ExportFormat.Entry(
                            key: entry.key, value: entry.value ?? [], created: entry.created, accessed: entry.accessed,
                            expires: entry.expires
                        ).line + "\n"
                    exported += 1
                }
                try emit(text)
                text = ""
                progress.update(seen)
            }
            try emit(text)
            try file?.finish()
            progress.finish()
            FileHandle.standardError.write(
                Data("cache-dump: exported \(OutputFormatting.count(exported, "entry", "entries"))\n".utf8))
            if longKeys > 0 {
                Console.error(
                    "\(OutputFormatting.count(longKeys, "key")) longer than import's limit of "
                        + "\(OutputFormatting.bytes(ExportFormat.maxKeyLength)): import refuses such a file")
            }
            if damaged > 0 {
                throw DumpFailure(
                    .damaged,
                    "skipped \(OutputFormatting.count(damaged, "damaged record")); verify --repair removes them")
            }
            return .success
        }
    }
}
