import ArgumentParser
import Foundation
import LMDBCache
import LMDBCacheStorage

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List entries: key, stored and raw size, compression, created, last access, expiry, tags.")

    enum Order: String, ExpressibleByArgument, CaseIterable {
        /// By key bytes.
        case key
        /// Least recently used first: the order eviction takes.
        case access
        /// Largest stored size first.
        case size
    }

    @OptionGroup var common: CommonOptions
    @Option(help: "Only keys starting with this text (UTF-8).")
    var prefix: String = ""
    @Option(help: "Only entries carrying this tag (found through the tag index).")
    var tag: String?
    @Option(help: "At most this many entries.")
    var limit: Int?
    @Option(help: "key, access (least recently used first) or size (largest first).")
    var sort: Order = .key
    @Flag(help: "Print a JSON array (times in milliseconds since 1970).")
    var json = false

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
    }

    func run() throws {
        try reporting {
            let disk = try TargetDirectory.openForReading(common.path)
            defer { disk.close() }
            let entries = try collect(disk)
            if json {
                Console.write(try OutputFormatting.json(entries.map(Self.object)))
            } else {
                let format = OutputFormatting.self
                let rows = entries.map { entry -> [String] in
                    if let damage = entry.damage {
                        return [
                            displayKey(entry.key), format.count(entry.storedBytes), "-", "-", "-", "-", "-",
                            "damaged: \(damage)",
                        ]
                    }
                    return [
                        displayKey(entry.key), format.count(entry.storedBytes), format.count(entry.valueBytes),
                        entry.isCompressed ? "yes" : "no", format.time(entry.created), format.time(entry.accessed),
                        entry.expires.map(format.time) ?? "never", Self.tagsCell(entry.tags),
                    ]
                }
                Console.write(
                    format.table(
                        ["KEY", "STORED", "RAW", "COMPRESSED", "CREATED", "ACCESSED", "EXPIRES", "TAGS"], rows,
                        rightAligned: [1, 2]))
            }
            return .success
        }
    }

    /// The entries to show, in order. Key order streams and stops at the limit; the other orders
    /// read every matching entry first.
    private func collect(_ disk: DiskCache) throws -> [StoredEntry] {
        if let tag {
            // The tag index names the entries: no scan of the store.
            var entries = try disk.storedEntries(taggedWith: tag).filter { $0.key.starts(with: Array(prefix.utf8)) }
            sortAndLimit(&entries)
            return entries
        }
        let wanted = sort == .key ? (limit ?? Int.max) : Int.max
        var entries: [StoredEntry] = []
        var after: [UInt8]?
        let progress = ProgressBar("list", total: disk.totalCount, quiet: common.quiet)
        defer { progress.finish() }
        while entries.count < wanted {
            let chunk = try disk.storedEntries(
                after: after, prefix: Array(prefix.utf8), limit: min(1_000, wanted - entries.count), withValues: false)
            guard let last = chunk.last else { break }
            entries += chunk
            after = last.storedKey
            progress.update(entries.count)
        }
        sortAndLimit(&entries)
        return entries
    }

    private func sortAndLimit(_ entries: inout [StoredEntry]) {
        switch sort {
        case .key: entries.sort { $0.key.lexicographicallyPrecedes($1.key) }
        case .access: entries.sort { ($0.accessed, $0.key.count) < ($1.accessed, $1.key.count) }
        case .size: entries.sort { $0.storedBytes > $1.storedBytes }
        }
        if let limit { entries = Array(entries.prefix(limit)) }
    }

    /// An entry's tags in one cell: each escaped as keys are (``displayKey(_:)``), a comma also
    /// escaped (`\x2c`) so it cannot pass for the separator; `-` for none.
    static func tagsCell(_ tags: [String]) -> String {
        guard !tags.isEmpty else { return "-" }
        return tags.map { TerminalText.escaped($0).replacingOccurrences(of: ",", with: #"\x2c"#) }.joined(
            separator: ",")
    }

    private static func object(_ entry: StoredEntry) -> [String: Any] {
        var object: [String: Any] = [
            "key": displayKey(entry.key), "keyBase64": Data(entry.key).base64EncodedString(),
            "storedBytes": entry.storedBytes, "valueBytes": entry.valueBytes, "compressed": entry.isCompressed,
            "created": Int(entry.created), "accessed": Int(entry.accessed),
            "expires": entry.expires.map { Int($0) as Any } ?? NSNull(),
            "tags": entry.tags.map { TerminalText.escaped($0) },
        ]
        if let damage = entry.damage { object["damage"] = damage }
        return object
    }
}
