import ArgumentParser
import Foundation
import LMDBCache

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
