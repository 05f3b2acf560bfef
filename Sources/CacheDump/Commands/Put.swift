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
    @Option(name: .customLong("tag"), help: "Tag the entry (repeatable): rm --tag and list --tag find it by each.")
    var tags: [String] = []

    func run() throws {
        try reporting {
            let bytes = try keys.bytes(key)
            // Checked before the value is read or the store opened.
            let entryTags = try EntryTags(tags)
            let value: [UInt8]
            do {
                value =
                    try file.map { [UInt8](try Data(contentsOf: URL(fileURLWithPath: $0))) }
                    ?? [UInt8](FileHandle.standardInput.readDataToEndOfFile())
            } catch {
                throw DumpFailure(.badInput, "cannot read \(file ?? "standard input"): \(error.localizedDescription)")
            }
            let disk = try TargetDirectory.openForWriting(common.path)
            defer { disk.close() }
            if entryTags.isEmpty {
                try disk.setData(value, forKey: bytes, expiresAfter: expiresAfter?.duration)
            } else {
                try disk.setData(value, forKey: bytes, expiresAfter: expiresAfter?.duration, tags: Set(tags))
            }
            try disk.flush()
            Console.write("stored \(OutputFormatting.count(value.count, "byte")) under \(displayKey(bytes))\n")
            return .success
        }
    }
}
