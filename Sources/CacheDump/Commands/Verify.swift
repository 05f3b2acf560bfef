import ArgumentParser
import LMDBCache

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every record (checksum, decompression), the indexes and the totals.",
        discussion: """
            Checks the access, expiry and tag indexes both ways and the change log's entries too. \
            Prints each problem on a line of its own and exits with status 1 when there is any. \
            --repair removes damaged records, rebuilds the indexes and totals, and empties a \
            change log holding a bad entry (processes sharing the cache then drop their memory \
            tiers); it needs the store to itself (exit status 6 while another process has it open).
            """)

    @OptionGroup var common: CommonOptions
    @Flag(
        help:
            "Remove damaged records; rebuild the access, expiry and tag indexes and the totals; empty a bad change log."
    )
    var repair = false

    func run() throws {
        try reporting {
            let format = OutputFormatting.self
            let report: VerificationReport
            if repair {
                let disk = try TargetDirectory.openForWriting(common.path)
                defer { disk.close() }
                let found = try check(disk)
                for problem in found.problems { Console.write(problem + "\n") }
                let repaired = try disk.repair()
                Console.write(
                    "repaired: removed \(format.count(repaired.removedRecords, "damaged record")) and "
                        + "\(format.count(repaired.removedAccessTimes, "stray access time")); rebuilt "
                        + "\(format.count(repaired.accessEntries)) access and \(format.count(repaired.expiryEntries)) "
                        + "expiry index entries; tag index: dropped \(format.count(repaired.droppedTagEntries)), "
                        + "added \(format.count(repaired.addedTagEntries)); "
                        + "totals \(format.count(repaired.totalsBefore.count, "entry", "entries")), "
                        + "\(format.count(repaired.totalsBefore.bytes)) bytes -> "
                        + "\(format.count(repaired.totalsAfter.count, "entry", "entries")), \(format.count(repaired.totalsAfter.bytes)) bytes\n"
                )
                if repaired.droppedChanges > 0 {
                    Console.write(
                        "emptied the change log (\(format.count(repaired.droppedChanges, "entry", "entries"))); "
                            + "processes sharing the cache drop their memory tiers\n")
                }
                report = try check(disk)
                for problem in report.problems { Console.write("still: " + problem + "\n") }
            } else {
                let disk = try TargetDirectory.openForReading(common.path)
                defer { disk.close() }
                report = try check(disk)
                for problem in report.problems { Console.write(problem + "\n") }
            }
            let records = format.count(report.scanned.count, "record")
            if report.isClean {
                Console.write("\(records) checked: no problems\n")
                return .success
            }
            Console.write("\(records) checked: \(format.count(report.problems.count, "problem"))\n")
            return .problemsFound
        }
    }

    private func check(_ disk: DiskCache) throws -> VerificationReport {
        let progress = ProgressBar("verify", total: disk.totalCount, quiet: common.quiet)
        defer { progress.finish() }
        return try disk.verify(progress: progress.update)
    }
}
