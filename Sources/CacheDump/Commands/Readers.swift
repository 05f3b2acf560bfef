import ArgumentParser
import Foundation
import LMDBCache
import LMDBCacheStorage

struct Readers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List LMDB reader slots and their processes (this one left out).",
        discussion: """
            A slot is alive while its process holds LMDB's lock on the byte of lock.mdb at its pid \
            (what LMDB itself checks), stale once it does not (even if another program has the \
            pid by now), unknown when that cannot be told. COMMAND is shown, escaped, only for a \
            live reader.
            """)

    @OptionGroup var common: CommonOptions
    @Flag(name: .customLong("clear-stale"), help: "Free the slots of processes that have exited.")
    var clearStale = false
    @Flag(help: "Print a JSON array.")
    var json = false

    func run() throws {
        try reporting {
            let disk = try TargetDirectory.openForReading(common.path)
            defer { disk.close() }
            let slots = try disk.readerSlots().filter { $0.processID != getpid() }
            let commands = try Self.commands(slots, disk)
            if json {
                Console.write(
                    try OutputFormatting.json(
                        slots.map { slot -> [String: Any] in
                            [
                                "pid": Int(slot.processID), "thread": slot.thread,
                                "transaction": slot.transaction.map { $0 as Any } ?? NSNull(),
                                "stale": slot.state == .stale, "state": slot.state.rawValue,
                                "command": commands[slot.processID] ?? NSNull(),
                            ]
                        }))
            } else {
                let rows = slots.map { slot in
                    [
                        "\(slot.processID)", slot.thread, slot.transaction.map { "\($0)" } ?? "-",
                        slot.state.rawValue, commands[slot.processID] ?? "-",
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

    /// The live readers' command names from /proc, escaped (any process can name itself
    /// anything), by pid. Only for a slot whose pid is the process holding its LMDB lock, before
    /// and after the name is read: a stale slot's pid may belong to another program (another
    /// user's) by now, and that program's name is not the reader's. A pid whose lock is held
    /// both times is a reader of this store whichever process it is.
    private static func commands(_ slots: [ReaderSlot], _ disk: DiskCache) throws -> [Int32: String] {
        func holdsItsLock(_ slot: ReaderSlot) -> Bool { slot.state == .alive && slot.lockHolder == slot.processID }
        var names: [Int32: String] = [:]
        for slot in slots where holdsItsLock(slot) {
            guard var name = FileManager.default.contents(atPath: "/proc/\(slot.processID)/comm").map(Array.init)
            else { continue }
            if name.last == UInt8(ascii: "\n") { name.removeLast() }
            names[slot.processID] = TerminalText.escaped(name)
        }
        guard !names.isEmpty else { return [:] }
        let stillHolding = Set(try disk.readerSlots().filter(holdsItsLock).map(\.processID))
        return names.filter { stillHolding.contains($0.key) }
    }
}
