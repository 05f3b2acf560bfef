import ArgumentParser
import Foundation
import LMDBCache

struct Readers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List LMDB reader slots and their processes (this one left out).")

    @OptionGroup var common: CommonOptions
    @Flag(name: .customLong("clear-stale"), help: "Free the slots of processes that have exited.")
    var clearStale = false
    @Flag(help: "Print a JSON array.")
    var json = false

    func run() throws {
        try reporting {
            let disk = try CacheDirectory.openForReading(common.path)
            defer { disk.close() }
            let slots = try disk.readerSlots().filter { $0.processID != getpid() }
            if json {
                Console.write(
                    try OutputFormatting.json(
                        slots.map { slot -> [String: Any] in
                            [
                                "pid": Int(slot.processID), "thread": slot.thread,
                                "transaction": slot.transaction.map { $0 as Any } ?? NSNull(),
                                "stale": !slot.processIsAlive, "command": Self.command(slot.processID) ?? NSNull(),
                            ]
                        }))
            } else {
                let rows = slots.map { slot in
                    [
                        "\(slot.processID)", slot.thread, slot.transaction.map { "\($0)" } ?? "-",
                        slot.processIsAlive ? "alive" : "stale", Self.command(slot.processID) ?? "-",
                    ]
                }
                Console.write(
                    OutputFormatting.table(["PID", "THREAD", "TXN", "STATE", "COMMAND"], rows, rightAligned: [0]))
            }
            if clearStale {
                let cleared = try disk.clearStaleReaderSlots()
                Console.write("cleared \(OutputFormatting.count(cleared, "stale reader slot"))\n")
            }
            return .success
        }
    }

    /// The process's command name, from /proc.
    private static func command(_ pid: Int32) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
