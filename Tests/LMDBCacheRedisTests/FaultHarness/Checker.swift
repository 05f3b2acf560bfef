#if Redis
import LMDBCacheRedis

/// The rules of "What the fault harness checks" (SeveralMachines.md), as a pure function of a
/// ``FaultHistory``: no I/O, no clock; the same history always gets the same verdict.
enum FaultChecker {
    /// The harness's bounds, in milliseconds (the documentation gives their reasons).
    struct Bounds: Sendable {
        /// How much later than another write's end a write must start to supersede it.
        var epsilon: Double = 5
        /// How long after a change it is visible everywhere when nothing fails.
        var staleness: Double = 3_000
        /// How long a put must run into a spell of `maxmemory 1` for a refusal to be owed.
        var refusalLead: Double = 1_000
        /// How far the wall and monotonic clocks may move apart before ε means nothing.
        var clockDrift: Double = 2
        /// The machines' `writeRetryLimit`: how long a write may be retried before it is dropped.
        var writeRetryLimit: Double = 2_000
    }

    /// One broken rule, with the operations (and faults) that show it.
    struct Violation: Sendable, CustomStringConvertible {
        enum Rule: String, Sendable {
            case noPhantom = "R1 no phantom"
            case convergence = "R2 convergence"
            case lostWrite = "R2 lost write"
            case resurrection = "R3 removal undone"
            case staleness = "R4 stale read"
            case refusals = "R5 refusals counted"
            case harness = "harness assumption"
        }

        var rule: Rule
        var message: String
        var operations: [FaultHistory.Operation] = []
        var faults: [FaultHistory.Fault] = []

        var description: String {
            ([
                "\(rule.rawValue): \(message)"
            ] + operations.map { "    \($0)" } + faults.map { "    fault \($0)" }).joined(separator: "\n")
        }
    }

    /// What a write does to a key.
    enum Effect: Equatable {
        /// A put: its value, newer than what it follows.
        case strong(String)
        /// A load whose loader ran: its value, only where the key holds none.
        case load(String)
        /// A removal of the key, its tag, or everything.
        case removal
    }

    /// Every rule's violations in `history`.
    static func check(_ history: FaultHistory, bounds: Bounds = Bounds()) -> [Violation] {
        var violations: [Violation] = []
        if abs(history.clockDrift) > bounds.clockDrift {
            violations.append(
                Violation(
                    rule: .harness,
                    message:
                        "the wall clock and the monotonic clock moved \(history.clockDrift) ms apart: ε (\(bounds.epsilon) ms) is void"
                ))
        }
        violations += phantoms(history)
        violations += convergence(history, bounds)
        violations += staleness(history, bounds)
        violations += refusals(history, bounds)
        return violations
    }

    // MARK: Writes

    /// What `operation` does to `key`, if it may write it. An answer not understood may have
    /// written (a load's loader may have run).
    static func effect(of operation: FaultHistory.Operation, on key: String, tags: [String: String]) -> Effect? {
        switch operation.kind {
        case .put: return operation.key == key ? operation.value.map(Effect.strong) : nil
        case .load:
            guard operation.key == key, operation.loaded != false, let value = operation.value else { return nil }
            return .load(value)
        case .get: return nil
        case .remove: return operation.key == key ? .removal : nil
        case .removeTag: return operation.tag != nil && tags[key] == operation.tag ? .removal : nil
        case .removeAll: return .removal
        }
    }

    /// Whether `effect` supersedes others (a load's value supersedes nothing).
    static func supersedes(_ effect: Effect) -> Bool {
        if case .load = effect { return false }
        return true
    }

    /// The writes of `key` (final loads included when `finals`), with their effects.
    static func writes(
        of key: String, in history: FaultHistory, finals: Bool
    ) -> [(operation: FaultHistory.Operation, effect: Effect)] {
        history.operations.compactMap { operation in
            guard finals || !operation.isFinal, let effect = effect(of: operation, on: key, tags: history.tags) else {
                return nil
            }
            return (operation, effect)
        }
    }

    /// The writes among `writes` that no strong write or removal started more than ε after.
    static func unsuperseded(
        _ writes: [(operation: FaultHistory.Operation, effect: Effect)], _ bounds: Bounds
    ) -> [(operation: FaultHistory.Operation, effect: Effect)] {
        let latestStart = writes.filter { supersedes($0.effect) }.map(\.operation.start).max() ?? -.infinity
        return writes.filter { latestStart <= $0.operation.end + bounds.epsilon }
    }

    // MARK: R1

    /// R1: every value returned was written to that key by a put or load that started before.
    static func phantoms(_ history: FaultHistory) -> [Violation] {
        var writers: [String: FaultHistory.Operation] = [:]
        for operation in history.operations {
            guard let value = operation.value else { continue }
            if operation.kind == .put || (operation.kind == .load && operation.loaded != false) {
                writers[value] = operation
            }
        }
        var violations: [Violation] = []
        for read in history.operations where read.kind == .load || read.kind == .get {
            guard let value = read.result else { continue }
            guard let writer = writers[value] else {
                violations.append(
                    Violation(rule: .noPhantom, message: "\(value) was never written", operations: [read]))
                continue
            }
            if writer.key != read.key {
                violations.append(
                    Violation(
                        rule: .noPhantom, message: "\(value) was written to \(writer.key ?? "?"), not \(read.key ?? "?")",
                        operations: [writer, read]))
            } else if writer.start >= read.end {
                violations.append(
                    Violation(
                        rule: .noPhantom, message: "\(value) was read before its write started",
                        operations: [writer, read]))
            }
        }
        return violations
    }

    // MARK: R2, R3

    /// R2 and R3: one allowed value per key at the end.
    static func convergence(_ history: FaultHistory, _ bounds: Bounds) -> [Violation] {
        let droppedCounted = history.finalStats.contains { ($0["dropped"] ?? 0) > 0 }
        var violations: [Violation] = []
        for key in history.tags.keys.sorted() {
            let finals = history.operations.filter { $0.isFinal && $0.key == key }.sorted { $0.start < $1.start }
            guard let first = finals.first else {
                violations.append(Violation(rule: .convergence, message: "\(key) had no final load"))
                continue
            }
            let results = Set(finals.map { $0.result ?? "(nothing)" })
            if results.count > 1 || finals.contains(where: { $0.result == nil }) {
                violations.append(
                    Violation(
                        rule: .convergence, message: "the machines end with different values of \(key)",
                        operations: finals))
                continue
            }
            let final = first.result ?? ""
            let writes = writes(of: key, in: history, finals: false)
            let standing = unsuperseded(writes, bounds)
            var allowed = Set(standing.compactMap { value(of: $0.effect) })
            var mayEndAbsent = standing.contains { $0.effect == .removal } || writes.isEmpty
            // A write a fault came near may have been dropped (counted, and the key removed to
            // make it safe); a killed machine's count died with it.
            mayEndAbsent =
                mayEndAbsent
                || standing.contains { write in
                    exposed(write.operation, history, bounds)
                        && (droppedCounted
                            || history.faults.contains {
                                // Its count died with it, however long after the drop it was killed.
                                $0.kind == .killMachine && $0.node == write.operation.node
                                    && write.operation.start <= $0.start + bounds.epsilon
                            })
                }
            // What the loss of a standing write (SeveralMachines.md "Lost data") can bring back.
            for fault in history.faults {
                let lost = standing.filter { loses(fault, $0.operation, key: key, history, bounds) }
                guard !lost.isEmpty else { continue }
                if fault.kind == .killMachine {
                    // The killed machine's unsent writes never reached Redis: the key holds what
                    // the others' writes leave.
                    let rest = unsuperseded(
                        writes.filter { write in !(lost.contains { $0.operation == write.operation }) }, bounds)
                    allowed.formUnion(rest.compactMap { value(of: $0.effect) })
                    if rest.isEmpty || rest.contains(where: { $0.effect == .removal }) { mayEndAbsent = true }
                } else {
                    // Redis lost the key (and its tombstone or fence): it ends absent, or with a
                    // write that could still be queued somewhere when the data went.
                    mayEndAbsent = true
                    for write in writes where write.operation.start <= fault.start + bounds.epsilon
                        && write.operation.end + bounds.writeRetryLimit + bounds.staleness >= fault.start
                    {
                        if let value = value(of: write.effect) { allowed.insert(value) }
                    }
                }
            }
            if mayEndAbsent, let value = first.value { allowed.insert(value) }
            guard !allowed.contains(final) else { continue }
            let standingPuts = standing.filter { if case .strong = $0.effect { true } else { false } }
            let writer = writes.first { $0.operation.value == final }?.operation
            if standing.allSatisfy({ $0.effect == .removal }), !standing.isEmpty, let writer {
                violations.append(
                    Violation(
                        rule: .resurrection,
                        message: "\(key) ends with \(final), written before the removals that stand",
                        operations: [writer] + standing.map(\.operation) + finals))
            } else if final == first.value, !standingPuts.isEmpty {
                violations.append(
                    Violation(
                        rule: .lostWrite,
                        message:
                            "\(key) ends absent (the first final loader's value), though puts stand that no fault could have made a machine drop",
                        operations: standing.map(\.operation) + finals))
            } else {
                violations.append(
                    Violation(
                        rule: .convergence,
                        message: "\(key) ends with \(final), not the value of a write that stands",
                        operations: (writer.map { [$0] } ?? []) + standing.map(\.operation) + finals))
            }
        }
        return violations
    }

    /// The value `effect` writes, if any.
    static func value(of effect: Effect) -> String? {
        switch effect {
        case .strong(let value), .load(let value): value
        case .removal: nil
        }
    }

    /// Whether `fault` killed the machine that made `write` while it may still have had the write
    /// unsent: the write began before the kill, and not so long before that it must have been
    /// sent or dropped (`writeRetryLimit`, and B for the queue ahead of it).
    static func kills(_ write: FaultHistory.Operation, _ fault: FaultHistory.Fault, _ bounds: Bounds) -> Bool {
        fault.kind == .killMachine && fault.node == write.node && write.start <= fault.start + bounds.epsilon
            && write.end + bounds.writeRetryLimit + bounds.staleness >= fault.start
    }

    /// Whether `fault` may have lost `write` of `key`: Redis lost what it held when the fault
    /// began (killed without persistence; a cluster's primary killed, when it served the key's
    /// slot or its tag set's), and the write began before that; or the fault ``kills(_:_:_:)``
    /// the machine that made it.
    static func loses(
        _ fault: FaultHistory.Fault, _ write: FaultHistory.Operation, key: String, _ history: FaultHistory,
        _ bounds: Bounds
    ) -> Bool {
        switch fault.kind {
        case .killMachine:
            return kills(write, fault, bounds)
        case .killServer:
            return write.start <= fault.start + bounds.epsilon
        case .killPrimary:
            guard write.start <= fault.start + bounds.epsilon else { return false }
            guard let slots = fault.slots else { return true }
            return Self.slots(of: key, tag: history.tags[key], namespace: history.namespace).contains { slot in
                slots.contains { $0.contains(slot) }
            }
        default:
            return false
        }
    }

    /// The hash slots of `key`'s value key and of its tag's set, in `namespace`.
    static func slots(of key: String, tag: String?, namespace: String) -> [Int] {
        var keys = [namespace + ":v:" + key]
        if let tag { keys.append(namespace + ":t:" + tag) }
        return keys.map { HashSlot.slot(of: Array($0.utf8)) }
    }

    /// Whether any fault may have lost `write` of `key`.
    static func mayBeLost(
        _ write: FaultHistory.Operation, key: String, _ history: FaultHistory, _ bounds: Bounds
    ) -> Bool {
        history.faults.contains { loses($0, write, key: key, history, bounds) }
    }

    /// Whether a fault came near enough to `write` for it to be dropped: one active during
    /// [its start − B, its end + `writeRetryLimit` + B] (a write is dropped only after failing for
    /// `writeRetryLimit`, or refused for want of memory; B covers a circuit still open and the
    /// queue ahead of it). A machine's kill is not such a fault: see ``kills(_:_:_:)``.
    static func exposed(_ write: FaultHistory.Operation, _ history: FaultHistory, _ bounds: Bounds) -> Bool {
        let from = write.start - bounds.staleness
        let to = write.end + bounds.writeRetryLimit + bounds.staleness
        // A machine's kill drops none of the others' writes, and its own queue dies with it (the
        // loss rule, not a drop).
        return history.faults.contains { $0.kind != .killMachine && $0.start <= to && $0.end >= from }
    }

    /// How much of `history` the rules could judge: reads R4 judged, and keys whose end a lost
    /// write could be found in (for the summary of a run: a rule that judged nothing passed
    /// vacuously).
    static func coverage(_ history: FaultHistory, bounds: Bounds = Bounds()) -> (judgedReads: Int, lostWriteKeys: Int) {
        let judged = staleReads(history, bounds).judged
        var keys = 0
        for key in history.tags.keys {
            let standing = unsuperseded(writes(of: key, in: history, finals: false), bounds)
            if standing.contains(where: { if case .strong = $0.effect { true } else { false } }),
                !standing.contains(where: {
                    exposed($0.operation, history, bounds) || mayBeLost($0.operation, key: key, history, bounds)
                })
            {
                keys += 1
            }
        }
        return (judged, keys)
    }

    // MARK: R4

    /// R4: a read well after its key's newest write, with nothing failing or racing it, is not
    /// stale.
    static func staleness(_ history: FaultHistory, _ bounds: Bounds) -> [Violation] {
        staleReads(history, bounds).violations
    }

    /// R4's violations, and how many reads it judged.
    static func staleReads(_ history: FaultHistory, _ bounds: Bounds) -> (violations: [Violation], judged: Int) {
        var judged = 0
        var violations: [Violation] = []
        var writesByKey: [String: [(operation: FaultHistory.Operation, effect: Effect)]] = [:]
        for key in history.tags.keys { writesByKey[key] = writes(of: key, in: history, finals: true) }
        for read in history.operations where (read.kind == .get || read.kind == .load) && read.error == nil {
            guard let key = read.key, let writes = writesByKey[key] else { continue }
            let others = writes.filter { $0.operation != read }
            guard let newest = others.filter({ $0.operation.end < read.start }).max(by: { $0.operation.end < $1.operation.end })
            else { continue }
            // A load's value may not land (Redis held another): only strong writes and removals.
            guard supersedes(newest.effect), read.start - newest.operation.end > bounds.staleness else { continue }
            let from = newest.operation.start - bounds.staleness
            if history.faults.contains(where: { $0.start <= read.end && $0.end >= from }) { continue }
            if others.contains(where: { $0.operation != newest.operation && $0.operation.start <= read.end && $0.operation.end >= from }) {
                continue
            }
            judged += 1
            let acceptable: Bool
            switch newest.effect {
            case .strong(let value):
                acceptable =
                    read.result == value || (read.kind == .get && read.result == nil)
                    || (read.kind == .load && read.loaded == true && read.result == read.value)
            case .removal:
                acceptable =
                    read.kind == .get ? read.result == nil : (read.loaded == true && read.result == read.value)
            case .load:
                acceptable = true
            }
            if !acceptable {
                violations.append(
                    Violation(
                        rule: .staleness,
                        message: "\(key) read more than \(Int(bounds.staleness)) ms after its newest write, nothing failing",
                        operations: [newest.operation, read]))
            }
        }
        return (violations, judged)
    }

    // MARK: R5

    /// The spells of `maxmemory 1` R5 can judge: those whose refusals the nemesis sampled
    /// around them (``FaultHistory/Fault/refusedCounted``); in a history without samples, those
    /// no machine's kill followed (its count died with it) in a run where nothing but a full
    /// Redis refused writes (a restart's `-LOADING` refusals count alike).
    static func judgedSpells(_ history: FaultHistory) -> [FaultHistory.Fault] {
        let spells = history.faults.filter { $0.kind == .outOfMemory }
        if spells.contains(where: { $0.refusedCounted != nil }) { return spells.filter { $0.refusedCounted != nil } }
        guard !history.faults.contains(where: { $0.kind == .restartLoading }) else { return [] }
        let lastKill = history.faults.filter { $0.kind == .killMachine }.map(\.end).max() ?? -.infinity
        return spells.filter { $0.start > lastKill }
    }

    /// R5: a spell of `maxmemory 1` that a put ran into, long enough to be sent, left a count:
    /// of its own where the nemesis sampled one, else in the machines' final counts.
    static func refusals(_ history: FaultHistory, _ bounds: Bounds) -> [Violation] {
        let refused = history.finalStats.reduce(0) { $0 + ($1["refused"] ?? 0) }
        var violations: [Violation] = []
        for fault in judgedSpells(history) where (fault.refusedCounted ?? refused) == 0 {
            let puts = history.operations.filter {
                $0.kind == .put && $0.start >= fault.start && $0.start <= fault.end - bounds.refusalLead
            }
            if let put = puts.first {
                violations.append(
                    Violation(
                        rule: .refusals, message: "puts ran while Redis was full, and no machine counted a refusal",
                        operations: [put], faults: [fault]))
            }
        }
        return violations
    }
}
#endif
