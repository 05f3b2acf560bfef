#if Redis
import Foundation
import Testing

/// Negative controls for ``FaultChecker``: fabricated histories, each breaking one rule (and only
/// that one), must be reported; a clean one must pass. A checker that reports nothing would pass
/// every fault run, so these show that it can fail one.
@Suite("Fault harness checker")
struct FaultHarnessCheckerTests {
    typealias Operation = FaultHistory.Operation

    static func put(_ node: Int, _ key: String, _ value: String, _ start: Double) -> Operation {
        Operation(node: node, kind: .put, key: key, value: value, start: start, end: start + 1)
    }

    static func remove(_ node: Int, _ key: String, _ start: Double) -> Operation {
        Operation(node: node, kind: .remove, key: key, start: start, end: start + 1)
    }

    static func load(
        _ node: Int, _ key: String, _ value: String, _ start: Double, returns result: String, final: Bool = false
    ) -> Operation {
        Operation(
            node: node, kind: .load, key: key, value: value, start: start, end: start + 10, result: result,
            loaded: result == value, isFinal: final)
    }

    static func get(_ node: Int, _ key: String, _ start: Double, returns result: String?) -> Operation {
        Operation(node: node, kind: .get, key: key, start: start, end: start + 1, result: result)
    }

    /// The final loads of `k0` at 20 s, node 0 first, returning `results`.
    static func finals(_ results: [String]) -> [Operation] {
        results.enumerated().map { node, result in
            load(node, "k0", "final-\(node)-k0", 20_000 + Double(node) * 100, returns: result, final: true)
        }
    }

    static func history(
        _ operations: [Operation], faults: [FaultHistory.Fault] = [], refused: Int = 0, dropped: Int = 0
    ) -> FaultHistory {
        var history = FaultHistory(seed: 1, nodes: 3, tags: ["k0": "t0"])
        history.operations = operations
        history.faults = faults
        history.finalStats = (0..<3).map { _ in ["refused": refused, "dropped": dropped, "pending": 0] }
        return history
    }

    static func rules(_ history: FaultHistory) -> [FaultChecker.Violation.Rule] {
        FaultChecker.check(history).map(\.rule)
    }

    @Test("A clean history passes")
    func clean() {
        let history = Self.history(
            [Self.put(0, "k0", "n0.1", 0), Self.load(1, "k0", "n1.1", 5_000, returns: "n0.1"),
             Self.get(2, "k0", 6_000, returns: nil)]
                + Self.finals(["n0.1", "n0.1", "n0.1"]))
        #expect(FaultChecker.check(history).isEmpty)
    }

    @Test("R1: a value never written is a phantom")
    func phantom() {
        let history = Self.history(
            [Self.put(0, "k0", "n0.1", 0), Self.get(1, "k0", 100, returns: "n9.9")] + Self.finals(["n0.1", "n0.1", "n0.1"]))
        #expect(Self.rules(history) == [.noPhantom])
    }

    @Test("R2: machines that end with different values diverge")
    func divergence() {
        let history = Self.history(
            [Self.put(0, "k0", "n0.1", 0)] + Self.finals(["n0.1", "n0.1", "final-2-k0"]))
        #expect(Self.rules(history) == [.convergence])
    }

    @Test("R2: a put that stands, with nothing dropped, missing at the end is a lost write")
    func lostWrite() {
        let history = Self.history([Self.put(0, "k0", "n0.1", 0)] + Self.finals(["final-0-k0", "final-0-k0", "final-0-k0"]))
        #expect(Self.rules(history) == [.lostWrite])
        // A dropped write counted somewhere is no excuse for a put no fault came near…
        #expect(Self.rules(Self.history(history.operations, dropped: 1)) == [.lostWrite])
        // …but is for one a fault could have made its machine drop.
        let fault = FaultHistory.Fault(kind: .blackHole, node: 0, start: 500, end: 2_500)
        #expect(Self.rules(Self.history(history.operations, faults: [fault], dropped: 1)).isEmpty)
    }

    @Test("Lost data excuses only the writes it could have lost: Redis's loss any, a machine's kill its own")
    func lostData() {
        let lost = [Self.put(0, "k0", "n0.1", 0)] + Self.finals(["final-0-k0", "final-0-k0", "final-0-k0"])
        let undone = [Self.put(0, "k0", "n0.1", 0), Self.remove(1, "k0", 10)] + Self.finals(["n0.1", "n0.1", "n0.1"])
        for kind in [FaultHistory.Fault.Kind.killServer, .killPrimary] {
            let loss = FaultHistory.Fault(kind: kind, start: 5_000, end: 6_000)
            #expect(Self.rules(Self.history(lost, faults: [loss])).isEmpty)
            // The removal's tombstone went with the rest, and the put could still have been queued.
            #expect(Self.rules(Self.history(undone, faults: [loss])).isEmpty)
            // A loss before the write began excuses nothing.
            let earlier = FaultHistory.Fault(kind: kind, start: -3_000, end: -2_000)
            #expect(Self.rules(Self.history(lost, faults: [earlier])) == [.lostWrite])
            // Nor does one whose start the write followed: it reached the server started again.
            let during = [Self.put(0, "k0", "n0.1", 5_500)] + Self.finals(["final-0-k0", "final-0-k0", "final-0-k0"])
            #expect(Self.rules(Self.history(during, faults: [loss])) == [.lostWrite])
            // A put long sent (or dropped) when the loss came cannot come back over its removal.
            let old = [Self.put(0, "k0", "n0.1", -10_000), Self.remove(1, "k0", 10)] + Self.finals(["n0.1", "n0.1", "n0.1"])
            #expect(Self.rules(Self.history(old, faults: [loss])) == [.resurrection])
        }
        // A killed primary loses only the keys of its slots (k0's value key and its tag's set).
        let slots = FaultChecker.slots(of: "k0", tag: "t0", namespace: "fh")
        var elsewhere = FaultHistory.Fault(kind: .killPrimary, start: 5_000, end: 6_000)
        elsewhere.slots = (0..<16_384).filter { !slots.contains($0) }.map { $0...$0 }
        #expect(Self.rules(Self.history(lost, faults: [elsewhere])) == [.lostWrite])
        var here = elsewhere
        here.slots = [slots[0]...slots[0]]
        #expect(Self.rules(Self.history(lost, faults: [here])).isEmpty)
        // A machine's kill excuses its own writes (its queue died with it)…
        let kill = FaultHistory.Fault(kind: .killMachine, node: 0, start: 5_000, end: 6_000)
        #expect(Self.rules(Self.history(lost, faults: [kill])).isEmpty)
        // …not those it must have sent before…
        let later = FaultHistory.Fault(kind: .killMachine, node: 0, start: 10_000, end: 11_000)
        #expect(Self.rules(Self.history(lost, faults: [later])) == [.lostWrite])
        // …nor another machine's: the kill of node 2 loses none of node 0's puts or node 1's removals.
        let otherKill = FaultHistory.Fault(kind: .killMachine, node: 2, start: 5_000, end: 6_000)
        #expect(Self.rules(Self.history(lost, faults: [otherKill])) == [.lostWrite])
        #expect(Self.rules(Self.history(undone, faults: [otherKill])) == [.resurrection])
        // A put its machine dropped under a fault (counted there) and the machine killed long
        // after: its count died with it, so the key may end absent.
        let blackHole = FaultHistory.Fault(kind: .blackHole, node: 0, start: 0, end: 2_000)
        let muchLater = FaultHistory.Fault(kind: .killMachine, node: 0, start: 20_000, end: 21_000)
        #expect(Self.rules(Self.history(lost, faults: [blackHole, muchLater])).isEmpty)
        #expect(Self.rules(Self.history(lost, faults: [blackHole])) == [.lostWrite])
        // Node 0's put killed unsent leaves node 1's older one, not nothing.
        let older = [Self.put(1, "k0", "n1.1", 0), Self.put(0, "k0", "n0.2", 100)]
        for (final, rules) in [("n0.2", []), ("n1.1", []), ("final-0-k0", [FaultChecker.Violation.Rule.lostWrite])] {
            let history = Self.history(older + Self.finals([final, final, final]), faults: [kill])
            #expect(Self.rules(history) == rules, "ending with \(final)")
        }
    }

    @Test("R3: a value written before a removal that stands is a removal undone")
    func resurrection() {
        let history = Self.history(
            [Self.put(0, "k0", "n0.1", 0), Self.remove(1, "k0", 10)] + Self.finals(["n0.1", "n0.1", "n0.1"]))
        #expect(Self.rules(history) == [.resurrection])
    }

    @Test("R4: an older value read well after a newer write, nothing failing, is stale")
    func staleRead() {
        let history = Self.history(
            [Self.put(0, "k0", "n0.1", 0), Self.put(0, "k0", "n0.2", 4_000), Self.load(1, "k0", "n1.1", 8_000, returns: "n0.1")]
                + Self.finals(["n0.2", "n0.2", "n0.2"]))
        #expect(Self.rules(history) == [.staleness])
        // During a fault, the same read is not judged.
        let fault = FaultHistory.Fault(kind: .blackHole, node: 1, start: 7_000, end: 7_500)
        #expect(Self.rules(Self.history(history.operations, faults: [fault])).isEmpty)
    }

    @Test("R5: puts into a full Redis with no refusal counted")
    func uncountedRefusal() {
        let fault = FaultHistory.Fault(kind: .outOfMemory, start: 0, end: 2_000)
        let operations = [Self.put(0, "k0", "n0.1", 100)] + Self.finals(["n0.1", "n0.1", "n0.1"])
        #expect(Self.rules(Self.history(operations, faults: [fault])) == [.refusals])
        #expect(Self.rules(Self.history(operations, faults: [fault], refused: 1)).isEmpty)
        // Sampled around the spell: its own count decides, whatever other faults refused.
        var sampled = fault
        sampled.refusedCounted = 0
        #expect(Self.rules(Self.history(operations, faults: [sampled], refused: 5)) == [.refusals])
        sampled.refusedCounted = 1
        #expect(Self.rules(Self.history(operations, faults: [sampled])).isEmpty)
    }

    @Test("A history's JSON lines: a header, then each fault and operation, each line one JSON object")
    func jsonLines() throws {
        let fault = FaultHistory.Fault(kind: .outOfMemory, start: 0, end: 2_000)
        let history = Self.history(
            [Self.put(0, "k0", "n0.1", 100)] + Self.finals(["n0.1", "n0.1", "n0.1"]), faults: [fault])
        let lines = history.jsonLines().split(separator: "\n")
        #expect(lines.count == 1 + 1 + 4)
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
            #expect(object is [String: Any])
        }
        #expect(lines[1].contains("\"fault\""))
        #expect(lines.dropFirst(2).allSatisfy { $0.contains("\"op\"") })
    }

    @Test("A load's value supersedes nothing: an older put may win over it")
    func loadSupersedesNothing() {
        let history = Self.history(
            [Self.put(0, "k0", "n0.1", 0), Self.load(1, "k0", "n1.1", 100, returns: "n1.1")]
                + Self.finals(["n0.1", "n0.1", "n0.1"]))
        #expect(FaultChecker.check(history).isEmpty)
    }
}
#endif
