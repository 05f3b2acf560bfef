#if Redis
import Foundation

/// The fault harness's nemesis: a fault schedule drawn from a seed, and its execution against the
/// machines' proxies and the Redis server.
///
/// The schedule alternates stretches of faults (one at a time, each for 0.3–2 s, healed, then a
/// gap of 0.2–1 s) with calm windows (no fault for their whole length; the run ends with one), which the workload uses
/// to set up the reads rule R4 judges: first only local reads (``Phase/hush``, B + 0.5 s), then a
/// second of writes (``Phase/writes``), then only reads (``Phase/reads``, B + 3 s).
struct FaultSchedule: Sendable {
    /// One planned fault, in milliseconds from the run's start.
    struct Planned: Sendable, CustomStringConvertible {
        var kind: FaultHistory.Fault.Kind
        var node: Int?
        /// A reply delay (ms) or a rate (bytes a second), by kind.
        var parameter: Int
        var start: Double
        var duration: Double

        var description: String {
            "\(kind.rawValue)\(node.map { " n\($0)" } ?? "") at \(Int(start)) ms for \(Int(duration)) ms"
        }
    }

    /// What the workload may do at a moment.
    enum Phase: Sendable, Equatable {
        /// Anything (faults come and go).
        case normal
        /// Local reads alone: no write, so a calm window's writes follow none closely.
        case hush
        /// One write of each key by the machine that owns it, then reads; nothing failing.
        case writes
        /// Reads alone (a get-or-load may still run its loader), nothing failing.
        case reads
    }

    var faults: [Planned] = []
    /// Calm windows: (start, end of hush, end of writes, end), in milliseconds.
    var calm: [(start: Double, writes: Double, reads: Double, end: Double)] = []
    /// How long the workload runs, in milliseconds.
    var length: Double

    /// The faults of a run against one server: each machine's link, and the server's.
    static let serverKinds = FaultHistory.Fault.Kind.allCases.filter { ![.failover, .killPrimary].contains($0) }
    /// The faults of a run against a cluster: one primary's (failover, killed, paused writes),
    /// every primary full at once (so that a put during the spell is refused whichever slot it
    /// has), and a machine stopped.
    static let clusterKinds: [FaultHistory.Fault.Kind] = [
        .failover, .killPrimary, .pauseWrites, .outOfMemory, .stopMachine, .killMachine,
    ]
    /// The faults that act on the whole server, not on one machine's link.
    static let serverWide: Set<FaultHistory.Fault.Kind> = [
        .outOfMemory, .pauseWrites, .stopServer, .restartLoading, .killServer,
    ]

    /// The schedule of a run of `seconds` with `nodes` machines, drawn from `seed`, of faults of
    /// `kinds`; `nodes` also numbers the targets (a machine's link, or a cluster's primary) of the
    /// kinds that have one, which are those not in `whole`.
    init(
        seed: UInt64, seconds: Int, nodes: Int, staleness: Double, kinds: [FaultHistory.Fault.Kind] = serverKinds,
        whole: Set<FaultHistory.Fault.Kind> = serverWide
    ) {
        var random = SeededGenerator(seed: seed)
        length = Double(seconds) * 1_000
        var time = 500.0
        var nextCalm = Double.random(in: 4_000...8_000, using: &random)
        // The run ends with a calm window: the final values come from writes no fault came near.
        let calmLength = 2 * staleness + 4_500
        let faultsEnd = max(time, length - calmLength - 300)
        while time < faultsEnd {
            if time >= nextCalm && time + calmLength < faultsEnd {
                let writes = time + staleness + 500
                let reads = writes + 1_000
                let end = reads + staleness + 3_000
                calm.append((time, writes, reads, end))
                time = end + 300
                nextCalm = time + Double.random(in: 6_000...10_000, using: &random)
                continue
            }
            let kind = kinds.randomElement(using: &random) ?? .blackHole
            let node: Int? = whole.contains(kind) ? nil : Int.random(in: 0..<nodes, using: &random)
            let parameter: Int
            switch kind {
            case .delayReplies: parameter = Int.random(in: 20...400, using: &random)
            case .bandwidth: parameter = Int.random(in: 500...20_000, using: &random)
            default: parameter = 0
            }
            let duration = kind == .reset ? 0 : Double.random(in: 300...2_000, using: &random)
            guard time + duration < faultsEnd else { break }
            faults.append(Planned(kind: kind, node: node, parameter: parameter, start: time, duration: duration))
            time += duration + Double.random(in: 200...1_000, using: &random)
        }
        let start = max(time, faultsEnd) + 300
        calm.append((start, start + staleness + 500, start + staleness + 1_500, start + calmLength))
        length = max(length, start + calmLength)
    }

    /// The phase at `time` (milliseconds from the start).
    func phase(at time: Double) -> Phase {
        guard let window = calm.first(where: { $0.start <= time && time < $0.end }) else { return .normal }
        if time < window.writes { return .hush }
        if time < window.reads { return .writes }
        return .reads
    }
}

/// Applies a ``FaultSchedule`` in real time and records each fault in the history: from just
/// before it is applied to just after it is healed. Its target is one server with a proxy per
/// machine, or a cluster (whose primaries it fails over, pauses and fills).
struct Nemesis: Sendable {
    var server: RedisServer?
    var proxies: [FaultProxy] = []
    var cluster: RedisCluster?
    /// The machines, by index (``FaultHistory/Fault/Kind/stopMachine`` and
    /// ``FaultHistory/Fault/Kind/killMachine`` act on one).
    var machines: [FaultWorkload.Machine] = []
    let recorder: HistoryRecorder

    init(server: RedisServer, proxies: [FaultProxy], machines: [FaultWorkload.Machine], recorder: HistoryRecorder) {
        self.server = server
        self.proxies = proxies
        self.machines = machines
        self.recorder = recorder
    }

    init(cluster: RedisCluster, machines: [FaultWorkload.Machine], recorder: HistoryRecorder) {
        self.cluster = cluster
        self.machines = machines
        self.recorder = recorder
    }

    /// Runs the schedule to its end (every fault healed when it returns, even on an error).
    func run(_ schedule: FaultSchedule) async throws {
        var skipped = 0
        // A spell of `maxmemory 1` waiting for its count of refusals: taken just before the next
        // fault (or at the end), so that no other fault's refusals (a restart's `-LOADING`, a
        // failover's `-READONLY`) are in it.
        var spell: (fault: FaultHistory.Fault, before: Int?)?
        for fault in schedule.faults {
            // Waiting for the moment the schedule names: timing, not synchronisation.
            let wait = fault.start - recorder.now
            if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait))) }
            let start = recorder.now
            // Late (earlier faults' applying and healing took longer than planned): a fault that
            // would now reach into a calm window is left out, so the windows stay calm.
            let overhead: Double =
                switch fault.kind {
                // About 2 s until a replica takes over, 1–3 s to rejoin: a fault that overran
                // would only leave the window's reads unjudged.
                case .killPrimary: 5_000
                case .failover, .restartLoading, .killMachine: 3_000
                default: 300
                }
            if schedule.calm.contains(where: { $0.end > start && $0.start < start + fault.duration + overhead }) {
                skipped += 1
                continue
            }
            if let open = spell { await record(open.fault, refusedSince: open.before) }
            spell = nil
            let before = fault.kind == .outOfMemory ? await settledRefusedCount() : nil
            // The fault's start, after the samples (each waits for its machine's request under way):
            // a write begun before this moment ran before the fault.
            let applied = recorder.now
            let ports: [Int]
            let slots: [ClosedRange<Int>]?
            do {
                (ports, slots) = try await apply(fault)
            } catch let unready as ClusterNotReady {
                // Left out, as a fault too late for its window is: nothing was done.
                print("fault harness: \(fault.kind) left out: \(unready.reason)")
                skipped += 1
                continue
            }
            if fault.duration > 0 {
                do {
                    try await Task.sleep(for: .milliseconds(Int(fault.duration)))
                } catch {
                    try await heal(fault, ports)
                    throw error
                }
            }
            try await heal(fault, ports)
            let detail: String
            switch fault.kind {
            case .delayReplies: detail = "\(fault.parameter) ms"
            case .bandwidth: detail = "\(fault.parameter) B/s"
            default: detail = ""
            }
            let recorded = FaultHistory.Fault(
                kind: fault.kind, node: fault.node, detail: detail, slots: slots, start: applied, end: recorder.now)
            if fault.kind == .outOfMemory { spell = (recorded, before) } else { recorder.record(recorded) }
        }
        if let open = spell { await record(open.fault, refusedSince: open.before) }
        if skipped > 0 { print("fault harness: \(skipped) planned fault(s) left out, too late to end before a calm window") }
    }

    /// The refused writes every machine has counted (nil when one did not say).
    private func refusedCount() async -> Int? {
        var total = 0
        for machine in machines {
            guard let refused = try? await machine.node.stats()["refused"] else { return nil }
            total += refused
        }
        return total
    }

    /// The refused writes counted once the count stops moving (two samples 100 ms apart agree),
    /// nil when it has not within 2 s: the baseline of a spell of `maxmemory 1`, so that the
    /// trailing refusals of an earlier fault (a restart's `-LOADING`, a failover's `-READONLY`,
    /// retried with backoff after the heal) are not taken for the spell's own. A spell without
    /// a baseline is not judged (R5 judges sampled spells only).
    private func settledRefusedCount() async -> Int? {
        var last = await refusedCount()
        for _ in 0..<20 {
            // Sampling a counter until it rests: timing of the nemesis, not a test's wait.
            try? await Task.sleep(for: .milliseconds(100))
            let now = await refusedCount()
            if let now, now == last { return now }
            last = now
        }
        return nil
    }

    /// Records `fault` with the refusals counted since `before` (for R5).
    private func record(_ fault: FaultHistory.Fault, refusedSince before: Int?) async {
        var fault = fault
        if let before, let after = await refusedCount() { fault.refusedCounted = after - before }
        recorder.record(fault)
    }

    private func proxy(_ fault: FaultSchedule.Planned) -> FaultProxy? {
        fault.node.flatMap { proxies.indices.contains($0) ? proxies[$0] : nil }
    }

    private func machine(_ fault: FaultSchedule.Planned) -> FaultWorkload.Machine? {
        fault.node.flatMap { machines.indices.contains($0) ? machines[$0] : nil }
    }

    /// Applies `fault`; in a cluster, returns the ports it acted on (for its heal) and, for a
    /// killed primary, the slots it served.
    private func apply(_ fault: FaultSchedule.Planned) async throws -> (ports: [Int], slots: [ClosedRange<Int>]?) {
        switch fault.kind {
        case .stopMachine:
            machine(fault)?.node.pause()
            return ([], nil)
        case .killMachine:
            guard let machine = machine(fault) else { return ([], nil) }
            machine.isDown.store(true, ordering: .releasing)
            machine.kills.add(1, ordering: .releasing)
            try await Self.offPool { machine.node.killProcess() }
            return ([], nil)
        default: break
        }
        if let cluster { return try await apply(fault, on: cluster) }
        guard let server else { return ([], nil) }
        switch fault.kind {
        case .blackHole: proxy(fault)?.current = .blackHole
        case .delayReplies: proxy(fault)?.current = .delayReplies(by: .milliseconds(fault.parameter))
        case .dropReplies: proxy(fault)?.current = .dropReplies
        case .bandwidth: proxy(fault)?.current = .bandwidth(bytesPerSecond: fault.parameter)
        case .reset: proxy(fault)?.resetConnections()
        case .outOfMemory: try await cli(["CONFIG", "SET", "maxmemory", "1"])
        case .pauseWrites:
            // The pause's own limit is a backstop: the heal unpauses.
            try await cli(["CLIENT", "PAUSE", "\(Int(fault.duration) + 5_000)", "WRITE"])
        case .stopServer: server.pause()
        case .restartLoading:
            try await FleetNode.offPool { Result { try server.shutDownSaving() } }.get()
            try await server.startLoading()
        case .killServer: try await Self.offPool { server.kill() }
        case .failover, .killPrimary, .stopMachine, .killMachine: break
        }
        return ([], nil)
    }

    private func heal(_ fault: FaultSchedule.Planned, _ ports: [Int]) async throws {
        switch fault.kind {
        case .stopMachine:
            machine(fault)?.node.resume()
            return
        case .killMachine:
            guard let machine = machine(fault) else { return }
            try await Self.offPool { try machine.node.restart() }
            machine.isDown.store(false, ordering: .releasing)
            return
        default: break
        }
        if let cluster { return try await heal(fault, ports, on: cluster) }
        guard let server else { return }
        switch fault.kind {
        case .blackHole, .delayReplies, .dropReplies, .bandwidth: proxy(fault)?.current = .none
        case .reset: break
        case .outOfMemory: try await cli(["CONFIG", "SET", "maxmemory", "0"])
        case .pauseWrites: try await cli(["CLIENT", "UNPAUSE"])
        case .stopServer: server.resume()
        case .restartLoading: try await server.finishLoading()
        case .killServer: try await server.restart()
        case .failover, .killPrimary, .stopMachine, .killMachine: break
        }
    }

    /// A cluster fault: on the primary the fault's node numbers (in port order), or for
    /// `outOfMemory` on every primary; returns the ports (a failover's: its primary, then the
    /// replica that took over).
    private func apply(
        _ fault: FaultSchedule.Planned, on cluster: RedisCluster
    ) async throws -> (ports: [Int], slots: [ClosedRange<Int>]?) {
        // As one node sees the map, each confirmed by its own ROLE (a node's view may lag a failover).
        let primaries = try await Self.offPool {
            try cluster.masterPorts().filter { try cluster.command($0, "ROLE").hasPrefix("master") }
        }
        guard !primaries.isEmpty else { throw RedisCluster.Failure(description: "no primary serves slots") }
        let primary = primaries[(fault.node ?? 0) % primaries.count]
        switch fault.kind {
        case .failover:
            let replica = try await Self.readyReplica(of: primary, in: cluster)
            try await cluster.failover(to: replica)
            return ([primary, replica], nil)
        case .killPrimary:
            // A replica that can take over (its link up: one that rejoined lately may still be
            // syncing), and the slots whose data may go. Replication is asynchronous: the replica
            // that takes over may lack the last writes.
            let replica = try await Self.readyReplica(of: primary, in: cluster)
            let slots = try await Self.offPool { try cluster.roles(askingPort: primary)[primary] ?? [] }
                .compactMap(Self.slotRange)
            try await Self.offPool { try cluster.killProcess(primary) }
            try await cluster.waitForFailover(of: primary)
            return ([primary], slots)
        case .pauseWrites:
            let milliseconds = "\(Int(fault.duration) + 5_000)"
            try await Self.offPool { try cluster.command(primary, "CLIENT", "PAUSE", milliseconds, "WRITE") }
            return ([primary], nil)
        case .outOfMemory:
            for port in primaries { try await Self.offPool { try cluster.command(port, "CONFIG", "SET", "maxmemory", "1") } }
            return (primaries, nil)
        default:
            throw RedisCluster.Failure(description: "\(fault.kind) is not a cluster fault")
        }
    }

    private func heal(_ fault: FaultSchedule.Planned, _ ports: [Int], on cluster: RedisCluster) async throws {
        switch fault.kind {
        case .failover:
            // Back: the old primary, now the replica, takes over again, once linked. After a
            // second failover of one shard Redis 7.0 left the demoted primary unlinked for good
            // (3 of 3 replays of one seed waited 120 s): the failback is then left out, and the
            // cluster, which serves every slot, stays as the failover left it.
            if let primary = ports.first {
                if await Self.isLinkedReplica(primary, in: cluster) {
                    try await cluster.failover(to: primary)
                } else {
                    print("fault harness: failback to \(primary) left out: its link to the new primary is not up")
                }
            }
        case .killPrimary:
            // Back as a replica of the node that took over.
            if let primary = ports.first { try await cluster.restartNode(primary) }
        case .pauseWrites:
            for port in ports { try await Self.offPool { try cluster.command(port, "CLIENT", "UNPAUSE") } }
        case .outOfMemory:
            for port in ports { try await Self.offPool { try cluster.command(port, "CONFIG", "SET", "maxmemory", "0") } }
        default:
            break
        }
    }

    /// Thrown before a failover or a killed primary whose shard has no replica ready to take
    /// over: the nemesis leaves that fault out.
    struct ClusterNotReady: Error { var reason: String }

    /// A replica of `primary` with its link up, within 10 s. After a shard's failovers the
    /// demoted node can stay unlinked for good (Redis 7.0: replays of a soak seed waited 120 s
    /// for one, and one found the shard without a replica at all): the fault is then left out
    /// rather than the run stopped.
    static func readyReplica(of primary: Int, in cluster: RedisCluster) async throws -> Int {
        let replica = await withinTenSeconds {
            try cluster.replica(of: primary).flatMap { try cluster.isLinkedReplica($0) ? $0 : nil }
        }
        guard let replica else { throw ClusterNotReady(reason: "no replica of \(primary) with its link up within 10 s") }
        return replica
    }

    /// Whether `port` is a replica with its link to its primary up, within 10 s.
    static func isLinkedReplica(_ port: Int, in cluster: RedisCluster) async -> Bool {
        await withinTenSeconds { try cluster.isLinkedReplica(port) ? true : nil } != nil
    }

    /// `probe`'s first answer within 10 s, asked every 100 ms (an error counts as none).
    private static func withinTenSeconds<T: Sendable>(_ probe: @escaping @Sendable () throws -> T?) async -> T? {
        let end = ContinuousClock.now + .seconds(10)
        while true {
            if let found = try? await offPool(probe) { return found }
            guard ContinuousClock.now < end else { return nil }
            // Polling the cluster's state: timing of the nemesis, not a test's wait.
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// A slot range of `CLUSTER NODES` (`0-5460`, or one slot), or nil for anything else (a slot
    /// being migrated).
    static func slotRange(_ text: String) -> ClosedRange<Int>? {
        let bounds = text.split(separator: "-", omittingEmptySubsequences: false).map { Int($0) }
        switch bounds.count {
        case 1: return bounds[0].map { $0...$0 }
        case 2:
            guard let low = bounds[0], let high = bounds[1], low <= high else { return nil }
            return low...high
        default: return nil
        }
    }

    /// Heals everything whatever the schedule did (after an error).
    func healAll() async {
        for machine in machines {
            machine.node.resume()
            if machine.isDown.load(ordering: .acquiring) {
                _ = try? await Self.offPool { try machine.node.restart() }
                machine.isDown.store(false, ordering: .releasing)
            }
        }
        if let cluster {
            for node in cluster.nodes where !((try? cluster.runningPorts()) ?? []).contains(node.port) {
                try? await cluster.restartNode(node.port)
            }
            for port in (try? cluster.runningPorts()) ?? [] {
                _ = try? await Self.offPool { try cluster.command(port, "CONFIG", "SET", "maxmemory", "0") }
                _ = try? await Self.offPool { try cluster.command(port, "CLIENT", "UNPAUSE") }
            }
        }
        guard let server else { return }
        server.resume()
        if !server.isRunning { try? await server.restart() }
        for proxy in proxies { proxy.current = .none }
        _ = try? await cli(["CONFIG", "SET", "maxmemory", "0"])
        _ = try? await cli(["CLIENT", "UNPAUSE"])
        try? await server.finishLoading()
    }

    /// `body` (redis-cli processes) off Swift concurrency's threads.
    private static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await FleetNode.offPool { Result { try body() } }.get()
    }

    /// `redis-cli`, off Swift concurrency's threads; throws unless it answered OK.
    private func cli(_ arguments: [String]) async throws {
        guard let server else { return }
        let reply = await FleetNode.offPool { Result { try server.cli(arguments) } }
        let text = try reply.get().trimmingCharacters(in: .whitespacesAndNewlines)
        guard text == "OK" else {
            throw RedisServer.Failure(description: "redis-cli \(arguments.joined(separator: " ")) answered \(text)")
        }
    }
}
#endif
