import ArgumentParser
import Foundation
import LMDBCache

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Entries, sizes, compression, pages, map size, readers and access range.")

    @OptionGroup var common: CommonOptions
    @Flag(help: "Print JSON (camelCase keys; times in milliseconds since 1970).")
    var json = false

    func run() throws {
        try reporting {
            let disk = try TargetDirectory.openForReading(common.path)
            defer { disk.close() }
            let stats = try disk.storeStatistics()
            if json {
                var object: [String: Any] = [
                    "path": common.path, "entries": stats.entries, "recordedEntries": stats.recordedEntries,
                    "logicalBytes": stats.logicalBytes, "storedBytes": stats.storedBytes,
                    "payloadBytes": stats.payloadBytes, "compressedEntries": stats.compressedEntries,
                    "compressionRatio": stats.compressionRatio, "fileSize": stats.fileSize, "pageSize": stats.pageSize,
                    "pagesInUse": stats.pagesInUse, "freePages": stats.freePages, "mapSize": stats.mapSize,
                    "readerSlots": stats.readerSlots, "staleReaderSlots": stats.staleReaderSlots,
                    "expiredEntries": stats.expiredEntries, "damagedRecords": stats.damagedRecords,
                    "formatVersion": stats.formatVersion,
                ]
                // Times come from the file's index keys: any 8-byte value, printed as it is.
                object["oldestAccess"] = stats.oldestAccess.map { NSNumber(value: $0) as Any } ?? NSNull()
                object["newestAccess"] = stats.newestAccess.map { NSNumber(value: $0) as Any } ?? NSNull()
                Console.write(try OutputFormatting.json(object))
                return .success
            }
            let format = OutputFormatting.self
            let rows: [[String]] = [
                ["entries", format.count(stats.entries)],
                ["logical bytes", "\(format.bytes(stats.logicalBytes)) (\(format.count(stats.logicalBytes)))"],
                ["stored bytes", "\(format.bytes(stats.storedBytes)) (\(format.count(stats.storedBytes)))"],
                [
                    "compression ratio",
                    String(format: "%.2f", stats.compressionRatio)
                        + " (\(format.count(stats.compressedEntries)) entries compressed)",
                ],
                ["file size", "\(format.bytes(stats.fileSize)) (\(format.count(stats.fileSize)))"],
                [
                    "pages",
                    "\(format.count(stats.pagesInUse)) in use, \(format.count(stats.freePages)) free, "
                        + "\(format.bytes(stats.pageSize)) each",
                ],
                ["map size", format.bytes(stats.mapSize)],
                ["reader slots", "\(stats.readerSlots) in use, \(stats.staleReaderSlots) stale"],
                ["oldest access", stats.oldestAccess.map(format.time) ?? "-"],
                ["newest access", stats.newestAccess.map(format.time) ?? "-"],
                ["expired, not trimmed", format.count(stats.expiredEntries)],
                ["damaged records", format.count(stats.damagedRecords)],
                ["format version", "\(stats.formatVersion)"],
            ]
            Console.write(
                rows.map { $0[0].padding(toLength: 22, withPad: " ", startingAt: 0) + $0[1] }.joined(separator: "\n")
                    + "\n")
            return .success
        }
    }
}
