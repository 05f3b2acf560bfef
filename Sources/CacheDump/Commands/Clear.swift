import ArgumentParser
import Foundation
import LMDBCache

struct Clear: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove every entry (asks first unless --yes).")

    @OptionGroup var common: CommonOptions
    @Flag(name: .shortAndLong, help: "Do not ask.")
    var yes = false

    func run() throws {
        try reporting {
            if !yes {
                // Asked before anything opens the store for writing: a declined clear changes
                // nothing (a writing open would upgrade the format and touch the lock file).
                let reader = try TargetDirectory.openForReading(common.path)
                let count = reader.totalCount
                reader.close()
                FileHandle.standardError.write(
                    Data(
                        "Remove all \(OutputFormatting.count(count, "entry", "entries")) from \(common.path)? [y/N] "
                            .utf8))
                let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
                guard answer == "y" || answer == "yes" else {
                    throw DumpFailure(.cancelled, "nothing removed")
                }
            }
            let disk = try TargetDirectory.openForWriting(common.path)
            defer { disk.close() }
            let count = disk.totalCount
            try disk.removeAll()
            Console.write("removed \(OutputFormatting.count(count, "entry", "entries"))\n")
            return .success
        }
    }
}
