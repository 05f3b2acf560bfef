#if Redis
import Foundation
import Testing

/// Directed runs of the fault harness: a fault schedule written out by hand for one race the
/// random schedule reaches rarely, recorded and judged by ``FaultChecker`` like a seeded run.
@Suite("Fault harness, directed scenarios", .serialized)
struct FaultHarnessDirectedTests {
    @Test(
        "A tag removal made after a partitioned machine's put returned is not undone when the put lands",
        .timeLimit(.minutes(5)))
    func tagRemovalAfterPartitionedPut() async throws {
        let bounds = FaultChecker.Bounds()
        let server = try await RedisServer()
        defer { server.stop() }
        var proxies: [FaultProxy] = []
        defer { for proxy in proxies { proxy.stop() } }
        var machines: [FaultWorkload.Machine] = []
        for index in 0..<2 {
            let proxy = try FaultProxy(upstreamPort: server.port)
            proxies.append(proxy)
            let node = try FleetNode(
                "directed-n\(index)", port: proxy.port,
                options: ["timeout=150", "open=300", "retry=2000", "missed=both", "namespace=fh"])
            machines.append(FaultWorkload.Machine(index: index, node: node))
        }
        let harness = FaultHarnessTests()
        for machine in machines {
            guard try await machine.node.waitFor("n\(machine.index) subscribed", { $0["subscribed"] == 1 }) else { return }
        }
        let recorder = HistoryRecorder()
        let schedule = FaultSchedule(seed: 0, seconds: 5, nodes: 2, staleness: bounds.staleness)
        let workload = FaultWorkload(schedule: schedule, recorder: recorder)
        var history = FaultHistory(seed: 0, nodes: 2, tags: ["k0": "t0"])
        func perform(_ command: FaultWorkload.Command, _ machine: Int, final: Bool = false) async throws {
            recorder.record(try await workload.perform(command, on: machines[machine], isFinal: final))
        }

        // k0 written, then removed by its tag: its member leaves the tag's set, a tombstone stays.
        try await perform(.put("k0", "n0.1"), 0)
        guard try await harness.settle(machines) else { return }
        try await perform(.removeTag("t0"), 0)
        guard try await harness.settle(machines) else { return }
        // Machine 1, cut off from Redis, puts k0 (queued, retried); then machine 0 removes the tag.
        let start = recorder.now
        proxies[1].current = .blackHole
        let failures = try await machines[1].node.stats()["failures"] ?? 0
        try await perform(.put("k0", "n1.1"), 1)
        // Its put is being retried (and its end well over ε before the removal's start).
        guard
            try await machines[1].node.waitFor("n1's put failed once", { ($0["failures"] ?? 0) > failures && $0["pending"] == 1 })
        else { return }
        try await perform(.removeTag("t0"), 0)
        guard try await machines[0].node.waitFor("n0's tag removal landed", { $0["pending"] == 0 }) else { return }
        proxies[1].current = .none
        recorder.record(FaultHistory.Fault(kind: .blackHole, node: 1, start: start, end: recorder.now))
        guard try await harness.settle(machines) else { return }
        try await Task.sleep(for: .milliseconds(Int(bounds.staleness)))
        for machine in machines.indices {
            try await perform(.load("k0", "final-\(machine)-k0"), machine, final: true)
            guard try await harness.settle(machines) else { return }
        }
        for machine in machines { history.finalStats.append(try await machine.node.stats()) }
        for machine in machines { await machine.node.quit() }
        let violations = FaultChecker.check(history.with(recorder), bounds: bounds)
        // Found by this test: a tag removal tombstoned only the members its tag's set held when it
        // ran. k0 left the set with the first removal, the second found it empty, and the put,
        // older than the second removal but newer than k0's tombstone, landed when the partition
        // healed (R3). The removal now fences the tag's set first, and the put's tag script is
        // refused by the fence (RedisScripts.fence, WriteProtocolTests.tagRemovalFencesLateWrite).
        harness.finish(&history, recorder, violations, 0)
    }
}
#endif
