import Foundation

// The fleet suite's fault section: node 2 runs a Zipf mix of get-or-loads while the parent holds
// Redis in a fault, then again after it heals, LMDBCache beside Redis as the only cache (whose
// driver gives up after the cache's command timeout, connects again after a failure, and answers
// the loader's value: the kindest reading of a driver that would otherwise fail the request).

/// A fault the fleet suite holds Redis in.
enum FleetFault: String, CaseIterable {
    case stopped, full, pausedWrites, killed

    var label: String {
        switch self {
        case .stopped: return "Redis stopped (SIGSTOP)"
        case .full: return "Redis full (maxmemory 1, noeviction)"
        case .pausedWrites: return "writes paused (CLIENT PAUSE WRITE)"
        case .killed: return "Redis killed, restarted empty"
        }
    }

    func apply(to server: RedisServer) throws {
        switch self {
        case .stopped: server.signal(SIGSTOP)
        case .full: try Self.command(server, "CONFIG", "SET", "maxmemory", "1")
        case .pausedWrites: try Self.command(server, "CLIENT", "PAUSE", "600000", "WRITE")
        case .killed: server.kill()
        }
    }

    /// Ends the fault, trying up to five times 200 ms apart: an administrative command can fail
    /// while Redis wakes from SIGSTOP, and a restart while the old process's port is released.
    /// The last failure is thrown (the run then stops rather than measure a fault not healed).
    func heal(_ server: RedisServer) throws {
        var attempt = 1
        while true {
            do {
                return try healOnce(server)
            } catch where attempt < 5 {
                attempt += 1
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
    }

    private func healOnce(_ server: RedisServer) throws {
        switch self {
        case .stopped: server.signal(SIGCONT)
        case .full: try Self.command(server, "CONFIG", "SET", "maxmemory", "0")
        case .pausedWrites: try Self.command(server, "CLIENT", "UNPAUSE")
        case .killed: try server.restart()
        }
    }

    /// An administrative command on a connection of its own; throws unless Redis said OK.
    private static func command(_ server: RedisServer, _ words: String...) throws {
        let connection = try RESPConnection(port: server.port)
        connection.append(contentsOf: words.map { Array($0.utf8) })
        try connection.send()
        let reply = try connection.readSimple()
        guard reply == "OK" else { throw FleetFailure("\(words.joined(separator: " ")) answered \(reply)") }
    }
}

/// One phase of one fault, one system's calls.
struct FleetFaultPhase {
    var fault: FleetFault
    var healed: Bool
    var system: String
    var latencies: [UInt64]
    /// Calls served by each place: memory, disk, Redis, loader (LMDBCache); Redis, loader (Redis
    /// only: a miss, or a failure the loader answered).
    var served: [(String, Int)]
    /// Redis failures the system saw (LMDBCache's remote tier's count; Redis only's failed calls).
    var failures: Int
}

enum FleetFaultSection {
    /// Runs every fault on `node`: a warm-up, the fault held while each system calls for
    /// `milliseconds`, healed, the same after; the node settles (no write pending, circuit
    /// closed, subscribed) before each fault.
    static func run(
        node: FleetNodeProcess, server: RedisServer, keys: Int, milliseconds: Int, log: (String) -> Void
    ) throws -> [FleetFaultPhase] {
        var phases: [FleetFaultPhase] = []
        for (number, fault) in FleetFault.allCases.enumerated() {
            let prefix = "fault-\(fault.rawValue)"
            let seed = 0xFA17 + number * 10
            for system in ["cache", "only"] {
                try node.call("fault-zipf \(prefix) \(keys) \(milliseconds) \(seed) \(system)")
            }
            try node.call("settle")
            try fault.apply(to: server)
            do {
                phases += try measure(node, fault, healed: false, prefix, keys, milliseconds, seed + 1)
            } catch {
                try? fault.heal(server)
                throw error
            }
            try fault.heal(server)
            phases += try measure(node, fault, healed: true, prefix, keys, milliseconds, seed + 2)
            try node.call("settle")
            let line = phases.suffix(4).map { phase in
                "\(phase.system) \(phase.healed ? "after" : "during") p50 "
                    + formatNanoseconds(Double(phase.latencies.percentile(0.5)))
            }
            log("fleet: \(fault.label): " + line.joined(separator: ", "))
        }
        return phases
    }

    private static func measure(
        _ node: FleetNodeProcess, _ fault: FleetFault, healed: Bool, _ prefix: String, _ keys: Int,
        _ milliseconds: Int, _ seed: Int
    ) throws -> [FleetFaultPhase] {
        let cache = try node.call("fault-zipf \(prefix) \(keys) \(milliseconds) \(seed) cache")
        let only = try node.call("fault-zipf \(prefix) \(keys) \(milliseconds) \(seed) only")
        let errors = Int(try only.number("errors"))
        return [
            FleetFaultPhase(
                fault: fault, healed: healed, system: "LMDBCache", latencies: try cache.list("latencies"),
                served: [
                    ("memory", Int(try cache.number("memory"))), ("disk", Int(try cache.number("disk"))),
                    ("Redis", Int(try cache.number("redis"))), ("loader", Int(try cache.number("loads"))),
                ],
                failures: Int(try cache.number("failures"))),
            FleetFaultPhase(
                fault: fault, healed: healed, system: "Redis", latencies: try only.list("latencies"),
                served: [
                    ("memory", 0), ("disk", 0), ("Redis", Int(try only.number("hits"))),
                    ("loader", Int(try only.number("misses")) + errors),
                ],
                failures: errors),
        ]
    }

    /// The section's table and its rows (LMDBCache's with Redis only's p50 and p99 over its own).
    static func report(_ phases: [FleetFaultPhase], milliseconds: Int) -> (table: ExtraTable, rows: [ResultRow]) {
        var rows: [ResultRow] = []
        var cells: [[String]] = []
        var groupStarts: Set<Int> = []
        for (index, phase) in phases.enumerated() {
            let calls = phase.latencies.count
            let p50 = Double(phase.latencies.percentile(0.50))
            let p99 = Double(phase.latencies.percentile(0.99))
            if index > 0 && index % 4 == 0 { groupStarts.insert(cells.count) }
            cells.append(
                [
                    index % 4 == 0 ? phase.fault.label : "", phase.healed ? "after it heals" : "during", phase.system,
                    "\(calls)", formatNanoseconds(p50), formatNanoseconds(p99),
                ]
                    + phase.served.map { calls > 0 && (phase.system == "LMDBCache" || $0.0 == "Redis" || $0.0 == "loader")
                        ? formatPercent(Double($0.1) / Double(calls)) : "" }
                    + ["\(phase.failures)"])
            var row = ResultRow(
                suite: "fleet", system: phase.system, workload: "get-or-load, Zipf mix, \(phase.fault.label)",
                threads: 1, valueBytes: FleetValue.bytes, opsPerSecond: Double(calls) / (Double(milliseconds) / 1_000),
                p50Nanoseconds: p50, p99Nanoseconds: p99, variant: phase.healed ? "after it heals" : "during")
            row.calls = calls
            if phase.system == "LMDBCache", let baseline = phases.first(where: {
                $0.fault == phase.fault && $0.healed == phase.healed && $0.system == "Redis"
            }) {
                row.p50VsRedisOnly = p50 > 0 ? Double(baseline.latencies.percentile(0.50)) / p50 : nil
                row.p99VsRedisOnly = p99 > 0 ? Double(baseline.latencies.percentile(0.99)) / p99 : nil
            }
            rows.append(row)
        }
        let table = ExtraTable(
            title: "Under faults: node 2's Zipf mix for \(milliseconds) ms during each fault, then as long after it heals",
            header: ["fault", "when", "system", "calls", "p50", "p99", "memory", "disk", "Redis", "loader", "failures"],
            rightAligned: [3, 4, 5, 6, 7, 8, 9, 10], rows: cells, groupStarts: groupStarts)
        return (table, rows)
    }
}
