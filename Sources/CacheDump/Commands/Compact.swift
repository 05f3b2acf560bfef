import ArgumentParser
import Foundation
import LMDBCache
import LMDBCacheStorage

struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rewrite the store without its free pages, so the file shrinks to its live data.",
        discussion: "Refuses (exit status 6) while another process has the store open.")

    @OptionGroup var common: CommonOptions

    func run() throws {
        try reporting {
            let disk = try TargetDirectory.openForWriting(common.path)
            defer { disk.close() }
            let before = disk.fileSize
            let statistics = try disk.storeStatistics()
            // The copy grows to about the pages in use; its size is the progress.
            let progress = ProgressBar(
                "compact", total: statistics.pagesInUse * statistics.pageSize, quiet: common.quiet)
            let copy = common.path + "/" + StoreFiles.compactionFolder + "/" + StoreFiles.data
            try PolledProgress.run(
                progress,
                done: {
                    var info = stat()
                    return stat(copy, &info) == 0 ? Int(info.st_size) : 0
                }
            ) {
                try disk.compact()
            }
            let format = OutputFormatting.self
            Console.write(
                "compacted \(common.path): \(format.bytes(before)) -> \(format.bytes(disk.fileSize)), "
                    + "\(format.count(disk.totalCount, "entry", "entries"))\n")
            return .success
        }
    }
}
