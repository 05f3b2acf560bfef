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
    @Option(name: .shortAndLong, help: "Write to this file (created owner-only) instead of standard output.")
    var output: String?

    func run() throws {
        try reporting {
            let disk = try CacheDirectory.openForReading(common.path)
            defer { disk.close() }
            let handle = try output.map(OutputFile.open) ?? FileHandle.standardOutput
            let progress = ProgressBar("export", total: disk.totalCount, quiet: common.quiet)
            defer { progress.finish() }
            let now = UInt64(Date().timeIntervalSince1970 * 1_000)
            var text = ExportFormat.header + "\n"
            var exported = 0
            var seen = 0
            var damaged = 0
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
                    text +=
                        ExportFormat.Entry(
                            key: entry.key, value: entry.value ?? [], created: entry.created, accessed: entry.accessed,
                            expires: entry.expires
                        ).line + "\n"
                    exported += 1
                }
                try handle.write(contentsOf: Data(text.utf8))
                text = ""
                progress.update(seen)
            }
            try handle.write(contentsOf: Data(text.utf8))
            if output != nil { try handle.close() }
            progress.finish()
            FileHandle.standardError.write(
                Data("cache-dump: exported \(OutputFormatting.count(exported, "entry", "entries"))\n".utf8))
            if damaged > 0 {
                throw DumpFailure(
                    .damaged,
                    "skipped \(OutputFormatting.count(damaged, "damaged record")); verify --repair removes them")
            }
            return .success
        }
    }
}
