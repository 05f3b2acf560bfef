import ArgumentParser
import Foundation
import LMDBCache

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Remove entries; a key that is not there is reported (exit status 2).")

    @OptionGroup var common: CommonOptions
    @Argument(help: "The keys.")
    var keyList: [String]
    @OptionGroup var keys: KeyOptions

    func validate() throws {
        if keyList.isEmpty { throw ValidationError("name at least one key") }
    }

    func run() throws {
        try reporting {
            let all = try keyList.map(keys.bytes)
            let disk = try TargetDirectory.openForWriting(common.path)
            defer { disk.close() }
            var removed = 0
            var missing = 0
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
            return missing > 0 ? .keyNotFound : .success
        }
    }
}
