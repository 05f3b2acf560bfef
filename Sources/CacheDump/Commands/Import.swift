import ArgumentParser
import Foundation
import LMDBCache

/// `cache-dump import PATH FILE`: all or nothing as far as the file goes. The file is read twice,
/// a line at a time (``ImportFile``): the first pass checks every line against every limit a
/// write checks (``ExportFormat/parseEntry(_:)``), refusing a line longer than any entry can be
/// (``ExportFormat/maxLineLength``) without reading the rest of it; only when every line passed
/// is the cache opened (created when missing) and the second pass writes the entries. A failure
/// of the write itself (a full disk) can still stop it partway; the message then says how many
/// entries were written.
struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read an export file into a cache (created when missing), keeping timestamps and expiry.",
        discussion: """
            The file is read twice, a line at a time: every line is checked first (a bad line, \
            a line longer than any entry can be, a key over 16 MiB or a value over 256 MiB: exit \
            status 7 naming FILE:LINE, and the cache is left as it was, not even created), then \
            the entries are written. FILE - reads standard input, copied as it is checked into an \
            unlinked owner-only temporary file in $TMPDIR (or /tmp). Entries already expired are \
            skipped.
            """)

    @OptionGroup var common: CommonOptions
    @Argument(help: "The export file (JSON Lines from cache-dump export); - for standard input.")
    var file: String

    func run() throws {
        try reporting {
            let source = try ImportFile(file)
            // First pass: every line checked; nothing opened, nothing written.
            var checking = source.checkingLines()
            var entries = 0
            try Self.forEachLine(&checking, of: source) { number, line in
                if number == 1 {
                    do throws(ExportFormat.LineError) {
                        try ExportFormat.parseHeader(line)
                    } catch {
                        throw DumpFailure(.badInput, "\(source.name):1: \(error)")
                    }
                } else if !line.isEmpty {
                    do throws(ExportFormat.LineError) {
                        _ = try ExportFormat.parseEntry(line)
                    } catch {
                        throw DumpFailure(.badInput, "\(source.name):\(number): \(error)")
                    }
                    entries += 1
                }
            }
            if checking.lineNumber == 0 {
                throw DumpFailure(.badInput, "\(source.name):1: empty file; not an LMDBCache export")
            }

            // Second pass: the same lines again, written.
            var writing = try source.writingLines()
            let disk = try TargetDirectory.openForWriting(common.path, creating: true)
            defer { disk.close() }
            let progress = ProgressBar("import", total: entries, quiet: common.quiet)
            defer { progress.finish() }
            let now = UInt64(Date().timeIntervalSince1970 * 1_000)
            var seen = 0
            var imported = 0
            var expired = 0
            try Self.forEachLine(&writing, of: source) { number, line in
                guard number > 1, !line.isEmpty else { return }
                let entry: ExportFormat.Entry
                do throws(ExportFormat.LineError) {
                    entry = try ExportFormat.parseEntry(line)
                } catch {
                    throw DumpFailure(
                        .badInput,
                        "\(source.name):\(number): \(error); the file changed after it was checked, and "
                            + "\(OutputFormatting.count(imported, "entry", "entries")) were imported before this line")
                }
                seen += 1
                progress.update(seen)
                if let expires = entry.expires, expires <= now {
                    expired += 1
                    return
                }
                do {
                    try disk.importEntry(
                        entry.value, forKey: entry.key, created: entry.created, accessed: entry.accessed,
                        expires: entry.expires)
                    imported += 1
                    // Access times are buffered until committed: flush before the buffer fills.
                    if imported % 10_000 == 0 { try disk.flush() }
                } catch {
                    let failure = DumpFailure.from(error)
                    throw DumpFailure(
                        failure.status,
                        "\(failure.message) (at \(source.name):\(number), after "
                            + "\(OutputFormatting.count(imported, "entry", "entries")) were imported)")
                }
            }
            try disk.flush()
            guard seen == entries, source.isUnchanged else {
                throw DumpFailure(
                    .badInput,
                    "\(source.name) changed while it was being imported: \(OutputFormatting.count(imported, "entry", "entries")) imported"
                )
            }
            Console.write(
                "imported \(OutputFormatting.count(imported, "entry", "entries")); skipped \(expired) expired\n")
            return .success
        }
    }

    /// Calls `body` with each line of `reader` and its number, turning a reading failure into
    /// the message for it.
    private static func forEachLine(
        _ reader: inout LineReader, of source: ImportFile, _ body: (Int, Data) throws -> Void
    ) throws {
        while true {
            let line: Data?
            do throws(LineReader.Failure) {
                line = try reader.next()
            } catch {
                switch error {
                case .tooLong(let number):
                    throw DumpFailure(
                        .badInput,
                        "\(source.name):\(number): the line is longer than \(OutputFormatting.count(reader.limit)) "
                            + "bytes, the most an entry takes (a 16 MiB key and a 256 MiB value in base64); "
                            + "not read further")
                case .read(let code):
                    throw DumpFailure(.badInput, "cannot read \(source.name): \(String(cString: strerror(code)))")
                case .copy(let code):
                    throw DumpFailure(
                        .failure, "cannot copy \(source.name) to a temporary file: \(String(cString: strerror(code)))")
                }
            }
            guard let line else { return }
            try body(reader.lineNumber, line)
        }
    }
}
