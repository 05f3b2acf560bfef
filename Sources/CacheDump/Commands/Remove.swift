import ArgumentParser
import Foundation
import LMDBCache
import LMDBCacheStorage

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: """
            Remove entries by key or by tag; a key that is not there, or a tag no entry carries, is \
            reported (exit status 2).
            """)

    @OptionGroup var common: CommonOptions
    @Argument(help: "The keys.")
    var keyList: [String] = []
    @OptionGroup var keys: KeyOptions
    @Option(name: .customLong("tag"), help: "Remove every entry carrying this tag (repeatable).")
    var tags: [String] = []

    func validate() throws {
        if keyList.isEmpty && tags.isEmpty { throw ValidationError("name at least one key or --tag") }
    }

    func run() throws {
        try reporting {
            let all = try keyList.map(keys.bytes)
            // Every tag checked before anything is removed.
            for tag in tags { _ = try EntryTags.storedBytes(of: tag) }
            let disk = try TargetDirectory.openForWriting(common.path)
            defer { disk.close() }
            var missing = 0
            if !all.isEmpty {
                var removed = 0
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
            }
            for tag in tags {
                let removed = try disk.removeAll(taggedWith: tag)
                if removed == 0 {
                    Console.error("no entry tagged \(TerminalText.escaped(tag))")
                    missing += 1
                }
                let count = OutputFormatting.count(removed, "entry", "entries")
                Console.write("removed \(count) tagged \(TerminalText.escaped(tag))\n")
            }
            return missing > 0 ? .keyNotFound : .success
        }
    }
}
