#if Redis
import Foundation
import Testing

/// The Jepsen-style fault harness for the Redis tier: one real `redis-server`, three real
/// machines (`cache-test-helper node`) each behind a ``FaultProxy``, a seeded workload and
/// nemesis (``FaultWorkload``, ``Nemesis``), and ``FaultChecker``'s rules over the recorded
/// history ("What the fault harness checks" in SeveralMachines.md); and the same on a real
/// 6-node cluster, whose faults are the servers' (a per-machine proxy would not see the
/// cluster's redirections).
///
/// One seed, 40 s of workload by default (about 50 s in all on a two-core machine). `LMDBCACHE_FAULT_SEEDS=N` runs N
/// random seeds, `LMDBCACHE_FAULT_SEED=S` replays seed S, and `LMDBCACHE_FAULT_SECONDS` sets the
/// workload's length. A failing run prints its seed and the path of its history (JSON lines).
/// `LMDBCACHE_FAULT_KINDS=killPrimary,killMachine` draws only those kinds (a run with none of its
/// own kinds among them is skipped).
/// `LMDBCACHE_FAULT_NODE_OPTIONS` adds node options (space-separated `name=value`, overriding the
/// harness's: e.g. `missed=memory` to see the stale disk reads `.dropMemoryTier` allows).
@Suite("Fault harness", .serialized)
struct FaultHarnessTests {
    static let nodes = 3

    /// The seeds to run, from the environment (one random seed by default).
    static let seeds: [UInt64] = {
        let environment = ProcessInfo.processInfo.environment
        if let text = environment["LMDBCACHE_FAULT_SEED"], let seed = UInt64(text) { return [seed] }
        let count = environment["LMDBCACHE_FAULT_SEEDS"].flatMap { Int($0) }.map { max(1, min($0, 100_000)) } ?? 1
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt64.random(in: 1...UInt64(Int64.max), using: &generator) }
    }()

    /// How long each run's workload lasts, in seconds.
    static let seconds: Int = {
        let text = ProcessInfo.processInfo.environment["LMDBCACHE_FAULT_SECONDS"]
        return text.flatMap { Int($0) }.map { max(5, min($0, 3_600)) } ?? 40
    }()

    /// Node options from the environment, after the harness's own (a later option wins).
    static let extraOptions: [String] = {
        let text = ProcessInfo.processInfo.environment["LMDBCACHE_FAULT_NODE_OPTIONS"] ?? ""
        return text.split(separator: " ").map(String.init).filter { $0.contains("=") && !$0.contains("\n") }
    }()

    /// The fault kinds from the environment (`LMDBCACHE_FAULT_KINDS`, comma-separated, e.g.
    /// `killPrimary,killMachine`), or nil: every kind of the run.
    static let onlyKinds: Set<FaultHistory.Fault.Kind>? = {
        guard let text = ProcessInfo.processInfo.environment["LMDBCACHE_FAULT_KINDS"] else { return nil }
        return Set(text.split(separator: ",").compactMap { FaultHistory.Fault.Kind(rawValue: String($0)) })
    }()

    /// How long the machines may take to settle once the faults heal before it is a hang.
    static let settleLimit: Duration = .seconds(60)

    @Test(
        "Under faults: no phantom value, one allowed value at the end, removals stay, no stale read when calm, refusals counted",
        .timeLimit(.minutes(5)), arguments: seeds)
    func faultRun(seed: UInt64) async throws {
        let server = try await RedisServer()
        defer { server.stop() }
        try server.cli(["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        var proxies: [FaultProxy] = []
        defer { for proxy in proxies { proxy.stop() } }
        var machines: [FaultWorkload.Machine] = []
        for index in 0..<Self.nodes {
            let proxy = try FaultProxy(upstreamPort: server.port)
            proxies.append(proxy)
            let node = try FleetNode("fault-n\(index)", port: proxy.port, options: Self.options + Self.extraOptions)
            machines.append(FaultWorkload.Machine(index: index, node: node))
        }
        try await exercise(seed: seed, machines: machines, kinds: FaultSchedule.serverKinds) { recorder in
            Nemesis(server: server, proxies: proxies, machines: machines, recorder: recorder)
        }
    }

    @Test(
        "On a 3-primary cluster under failovers, paused and full primaries: the same rules",
        .timeLimit(.minutes(5)), arguments: seeds)
    func clusterFaultRun(seed: UInt64) async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let ports = cluster.nodes.map(\.port)
        for port in ports { try cluster.command(port, "CONFIG", "SET", "maxmemory-policy", "noeviction") }
        let seeds = ports.dropFirst().map(String.init).joined(separator: ",")
        var machines: [FaultWorkload.Machine] = []
        for index in 0..<Self.nodes {
            let node = try FleetNode(
                "fault-c\(index)", port: ports[0], options: Self.options + ["cluster=\(seeds)"] + Self.extraOptions)
            machines.append(FaultWorkload.Machine(index: index, node: node))
        }
        try await exercise(
            seed: seed, machines: machines, kinds: FaultSchedule.clusterKinds, whole: [.outOfMemory],
            removeAllPerMille: 1
        ) { recorder in
            Nemesis(cluster: cluster, machines: machines, recorder: recorder)
        }
    }

    /// The machines' options (the article's): command timeout 150 ms, circuit open 300 ms,
    /// `writeRetryLimit` 2 s, both tiers dropped on missed changes.
    static let options = ["timeout=150", "open=300", "retry=2000", "missed=both", "namespace=fh"]

    /// One run: `machines` subscribed, the seed's schedule of `kinds` applied by the nemesis
    /// `nemesis` makes while the workload runs, the final loads, the checker's verdict.
    func exercise(
        seed: UInt64, machines: [FaultWorkload.Machine], kinds: [FaultHistory.Fault.Kind],
        whole: Set<FaultHistory.Fault.Kind> = FaultSchedule.serverWide,
        removeAllPerMille: Int = 10, nemesis makeNemesis: (HistoryRecorder) -> Nemesis
    ) async throws {
        print("fault harness: seed \(seed), \(Self.seconds) s of workload (replay: LMDBCACHE_FAULT_SEED=\(seed))")
        let bounds = FaultChecker.Bounds()
        for machine in machines {
            guard try await machine.node.waitFor("n\(machine.index) subscribed", { $0["subscribed"] == 1 }) else { return }
        }

        // Only the kinds asked for, among the run's own (to soak a rare one).
        let asked = Self.onlyKinds.map { only in kinds.filter(only.contains) } ?? kinds
        guard !asked.isEmpty else {
            print("fault harness: none of LMDBCACHE_FAULT_KINDS is a fault of this run; skipped")
            return
        }
        let schedule = FaultSchedule(
            seed: seed, seconds: Self.seconds, nodes: Self.nodes, staleness: bounds.staleness, kinds: asked,
            whole: whole)
        let recorder = HistoryRecorder()
        let offsetAtStart = Self.wallMilliseconds() - recorder.now
        let nemesis = makeNemesis(recorder)
        var planned = FaultWorkload(schedule: schedule, recorder: recorder)
        planned.removeAllPerMille = removeAllPerMille
        let workload = planned
        var history = FaultHistory(seed: seed, nodes: Self.nodes, tags: FaultWorkload.tags)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await nemesis.run(schedule) }
                for machine in machines {
                    group.addTask { try await workload.run(machine, seed: seed) }
                }
                try await group.waitForAll()
            }
            await nemesis.healAll()
            // Quiet: every machine's writes in Redis, its circuit closed, its subscription up.
            guard try await settle(machines) else { return finish(&history, recorder, [], seed) }
            // B, the documented bound for a change to reach every machine.
            try await Task.sleep(for: .milliseconds(Int(bounds.staleness)))
            for machine in machines {
                for key in FaultWorkload.keys {
                    recorder.record(
                        try await workload.perform(
                            .load(key, "final-\(machine.index)-\(key)"), on: machine, isFinal: true))
                }
                guard try await settle(machines) else { return finish(&history, recorder, [], seed) }
            }
            for machine in machines { history.finalStats.append(try await machine.node.stats()) }
        } catch {
            await nemesis.healAll()
            Issue.record("seed \(seed): the run stopped: \(error)")
            return finish(&history, recorder, [], seed)
        }
        history.clockDrift = (Self.wallMilliseconds() - recorder.now) - offsetAtStart
        for machine in machines { await machine.node.quit() }
        finish(&history, recorder, FaultChecker.check(history.with(recorder), bounds: bounds), seed)
    }

    /// Waits until every machine has no pending write, a closed circuit and its subscription;
    /// false (and an issue "hung: …") after ``settleLimit``.
    func settle(_ machines: [FaultWorkload.Machine]) async throws -> Bool {
        let end = ContinuousClock.now + Self.settleLimit
        for machine in machines {
            while true {
                let stats = try await machine.node.stats()
                if stats["pending"] == 0 && stats["open"] == 0 && stats["subscribed"] == 1 { break }
                guard ContinuousClock.now < end else {
                    Issue.record("hung: n\(machine.index) did not settle within \(Self.settleLimit): \(stats)")
                    return false
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        return true
    }

    /// Prints the run's summary; on violations (or an earlier issue) writes the history and records
    /// one issue per violation, with the seed.
    func finish(
        _ history: inout FaultHistory, _ recorder: HistoryRecorder, _ violations: [FaultChecker.Violation],
        _ seed: UInt64
    ) {
        history = history.with(recorder)
        let kinds = Dictionary(grouping: history.faults, by: \.kind).map { "\($0.key.rawValue)×\($0.value.count)" }
            .sorted().joined(separator: " ")
        let totals = ["dropped", "refused", "openings", "drops", "failures"].map { name in
            "\(name)=\(history.finalStats.reduce(0) { $0 + ($1[name] ?? 0) })"
        }.joined(separator: " ")
        let coverage = FaultChecker.coverage(history)
        print(
            "fault harness: seed \(seed): \(history.operations.count) operations, faults \(kinds); \(totals); "
                + "R4 judged \(coverage.judgedReads) reads, R2 could find a lost write in \(coverage.lostWriteKeys) keys, "
                + "R5 judged \(FaultChecker.judgedSpells(history).count) spells; "
                + String(format: "clocks drifted %.2f ms; ", history.clockDrift) + "\(violations.count) violation(s)")
        // A run that stopped early (no final counts) is written out too.
        guard !violations.isEmpty || history.finalStats.isEmpty else { return }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "fault-harness-seed-\(seed)-\(UUID().uuidString.prefix(8)).jsonl")
        do {
            try history.jsonLines().write(to: url, atomically: true, encoding: .utf8)
            print("fault harness: seed \(seed): history written to \(url.path)")
        } catch {
            print("fault harness: seed \(seed): cannot write the history: \(error)")
        }
        for violation in violations {
            Issue.record("seed \(seed) (history \(url.path)):\n\(violation)")
        }
    }

    static func wallMilliseconds() -> Double { Date().timeIntervalSince1970 * 1_000 }
}

extension FaultHistory {
    /// This history with the operations and faults `recorder` holds.
    func with(_ recorder: HistoryRecorder) -> FaultHistory {
        var history = self
        history.operations = recorder.recordedOperations
        history.faults = recorder.recordedFaults
        return history
    }
}
#endif
