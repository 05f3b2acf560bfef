import Foundation

/// The parent's handle on one node of the fleet suite: a `cache-bench --fleet-node` process
/// (FleetNode.swift) it sends command lines to and reads one reply line per command from.
final class FleetNodeProcess {
    let number: Int
    private let process: Process
    private let input: FileHandle
    private let reader: LineReader

    /// How long a node may take over one reply before the run fails naming it.
    static let replyTimeout: Duration = .seconds(300)

    /// Starts node `number` and waits for its `ready`.
    init(number: Int, directory: String, port: UInt16, namespace: String) throws {
        self.number = number
        process = Process()
        process.executableURL = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? "/proc/self/exe")
        process.arguments = FleetNode.arguments(node: number, directory: directory, port: port, namespace: namespace)
        let inputPipe = Pipe()
        let outputPipe = Pipe()
        process.standardInput = inputPipe
        process.standardOutput = outputPipe
        try process.run()
        input = inputPipe.fileHandleForWriting
        reader = LineReader(outputPipe.fileHandleForReading.fileDescriptor)
        let line: String?
        do {
            line = try reader.line(limit: 1_024, timeout: Self.replyTimeout)
        } catch {
            stop()
            throw FleetFailure("node \(number): \(error)")
        }
        guard line == "ready" else {
            let failure = self.failure(
                line.map { "said \(quoted($0)) instead of ready" } ?? "ended before it was ready")
            stop()
            throw failure
        }
    }

    /// Sends `command` without waiting for its reply.
    func send(_ command: String) throws {
        guard writeIgnoringSIGPIPE(input.fileDescriptor, command + "\n") else {
            throw failure("did not take \(quoted(command))")
        }
    }

    /// The next reply: its fields when it is `ok ...`; a thrown ``FleetFailure`` with the node's
    /// message when it is `error ...`, or when the node ended.
    func receive() throws -> FleetReply {
        let line: String?
        do {
            // Latency lists: at most 20 digits and a comma per call, well under 64 MiB. The
            // longest call (a fill, a settle after a fault) takes seconds: one that has not
            // answered in five minutes has hung, and the run says which node did.
            line = try reader.line(limit: 64 << 20, timeout: Self.replyTimeout)
        } catch {
            throw FleetFailure("node \(number): \(error)")
        }
        guard let line else { throw failure("ended without a reply") }
        if line.hasPrefix("error ") { throw FleetFailure(String(line.dropFirst(6))) }
        guard line == "ok" || line.hasPrefix("ok ") else { throw failure("said \(quoted(line))") }
        return try FleetReply(line, node: number)
    }

    /// Sends `command` and returns its reply.
    @discardableResult
    func call(_ command: String) throws -> FleetReply {
        try send(command)
        return try receive()
    }

    /// Asks the node to close its cache and exit, and waits for it; a node that does not exit
    /// cleanly is a failure.
    func quit() throws {
        try call("quit")
        try? input.close()
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw failure("did not exit cleanly")
        }
    }

    /// Ends the node if it still runs (after a failure).
    func stop() {
        try? input.close()
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// A failure naming the node and, once it has ended, how.
    private func failure(_ what: String) -> FleetFailure {
        guard !process.isRunning else { return FleetFailure("node \(number) \(what)") }
        let how =
            process.terminationReason == .uncaughtSignal
            ? "killed by signal \(process.terminationStatus)" : "exit status \(process.terminationStatus)"
        return FleetFailure("node \(number) \(what) (\(how))")
    }
}

/// A node's `ok` reply: `name=value` fields, checked as they are read (another process's output).
struct FleetReply {
    private var fields: [Substring: Substring] = [:]
    private let node: Int

    init(_ line: String, node: Int) throws {
        self.node = node
        for field in line.split(separator: " ").dropFirst() {
            guard let equals = field.firstIndex(of: "="), fields[field[..<equals]] == nil else {
                throw FleetFailure("node \(node): a malformed reply \(quoted(line))")
            }
            fields[field[..<equals]] = field[field.index(after: equals)...]
        }
    }

    /// The field `name` as a whole number.
    func number(_ name: Substring) throws -> UInt64 {
        guard let text = fields[name], let value = Self.parse(text) else {
            throw FleetFailure("node \(node): no number \(name) in its reply")
        }
        return value
    }

    /// The field `name` as a comma-separated list of whole numbers (empty: none).
    func list(_ name: Substring) throws -> [UInt64] {
        guard let text = fields[name] else { throw FleetFailure("node \(node): no list \(name) in its reply") }
        if text.isEmpty { return [] }
        return try text.split(separator: ",", omittingEmptySubsequences: false).map { item in
            guard let value = Self.parse(item) else {
                throw FleetFailure("node \(node): \(name) holds \(quoted(String(item)))")
            }
            return value
        }
    }

    private static func parse(_ text: Substring) -> UInt64? {
        guard !text.isEmpty, text.utf8.count <= 20, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return UInt64(text)
    }
}
