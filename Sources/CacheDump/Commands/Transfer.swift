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

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read an export file into a cache (created when missing), keeping timestamps and expiry.",
        discussion: """
            The whole file is checked before anything is written: a bad line (exit status 7) \
            leaves the cache as it was. Entries already expired are skipped.
            """)

    @OptionGroup var common: CommonOptions
    @Argument(help: "The export file (JSON Lines from cache-dump export).")
    var file: String

    func run() throws {
        try reporting {
            let contents: Data
            do {
                contents = try Data(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw DumpFailure(.badInput, "cannot read \(file): \(error.localizedDescription)")
            }
            let lines = Self.lines(contents)
            guard let header = lines.first else {
                throw DumpFailure(.badInput, "\(file):1: empty file; not an LMDBCache export")
            }
            var entries: [ExportFormat.Entry] = []
            do throws(ExportFormat.LineError) {
                try ExportFormat.parseHeader(header)
            } catch {
                throw DumpFailure(.badInput, "\(file):1: \(error)")
            }
            for (index, line) in lines.enumerated().dropFirst() where !line.isEmpty {
                do throws(ExportFormat.LineError) {
                    entries.append(try ExportFormat.parseEntry(line))
                } catch {
                    throw DumpFailure(.badInput, "\(file):\(index + 1): \(error)")
                }
            }
            let disk = try CacheDirectory.openForWriting(common.path, creating: true)
            defer { disk.close() }
            let progress = ProgressBar("import", total: entries.count, quiet: common.quiet)
            defer { progress.finish() }
            let now = UInt64(Date().timeIntervalSince1970 * 1_000)
            var imported = 0
            var expired = 0
            for (index, entry) in entries.enumerated() {
                if let expires = entry.expires, expires <= now {
                    expired += 1
                    continue
                }
                try disk.importEntry(
                    entry.value, forKey: entry.key, created: entry.created, accessed: entry.accessed,
                    expires: entry.expires)
                imported += 1
                // Access times are buffered until committed: flush before the buffer fills.
                if imported % 10_000 == 0 { try disk.flush() }
                progress.update(index + 1)
            }
            try disk.flush()
            Console.write(
                "imported \(OutputFormatting.count(imported, "entry", "entries")); skipped \(expired) expired\n")
            return .success
        }
    }

    /// The lines of `data`, without their newlines.
    static func lines(_ data: Data) -> [ArraySlice<UInt8>] {
        let bytes = [UInt8](data)
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }
}
