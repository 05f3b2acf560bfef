import ArgumentParser
import Foundation
import LMDBCache

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an entry's value, decompressed, to standard output (exactly its bytes) or a file.")

    @OptionGroup var common: CommonOptions
    @Argument(help: "The key.")
    var key: String
    @OptionGroup var keys: KeyOptions
    @Flag(help: "Write the value as hexadecimal text, with a final newline.")
    var hex = false
    @Option(
        name: .shortAndLong,
        help: "Write to this new file (owner-only) instead; an existing one (a file or a link) is refused.")
    var output: String?
    @Flag(help: "With --output: replace what is there with a new file (a link there is replaced, not followed).")
    var force = false

    func validate() throws {
        if force && output == nil { throw ValidationError("--force goes with --output") }
    }

    func run() throws {
        try reporting {
            let bytes = try keys.bytes(key)
            let disk = try TargetDirectory.openForReading(common.path)
            defer { disk.close() }
            guard let entry = try disk.storedEntry(forKey: bytes) else {
                throw DumpFailure(.keyNotFound, "no entry for key \(displayKey(bytes))")
            }
            if let damage = entry.damage {
                throw DumpFailure(
                    .damaged,
                    "the record for key \(displayKey(bytes)) is damaged (\(damage)); verify --repair removes it")
            }
            let now = UInt64(Date().timeIntervalSince1970 * 1_000)
            if entry.isExpired(at: now), let expires = entry.expires {
                throw DumpFailure(
                    .keyNotFound,
                    "no live entry for key \(displayKey(bytes)): it expired at \(OutputFormatting.time(expires))")
            }
            let value = entry.value ?? []
            let payload = hex ? Array((hexString(value) + "\n").utf8) : value
            if let output {
                try OutputFile.write(payload, to: output, replacing: force)
            } else {
                Console.write(bytes: payload)
            }
            return .success
        }
    }
}
