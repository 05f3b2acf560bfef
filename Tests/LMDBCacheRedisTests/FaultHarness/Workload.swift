#if Redis
import Foundation
import Synchronization

/// SplitMix64: a small generator that gives the same numbers for the same seed on every
/// platform, so a run's schedule and each machine's operations replay from the seed.
struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The fault harness's workload: six keys `k0`…`k5`, key `kN` always tagged `t(N mod 2)`; each
/// machine runs one operation at a time, drawn from its own generator (seeded from the run's seed
/// and its index), and the machines run at once. Every value is unique: `n<node>.<count>`.
///
/// The sequence of each machine's operations follows from the seed; how they interleave with the
/// other machines' and with the faults does not (real processes, real sockets).
struct FaultWorkload: Sendable {
    static let keys = (0..<6).map { "k\($0)" }
    static let tags = Dictionary(uniqueKeysWithValues: keys.enumerated().map { ($1, "t\($0 % 2)") })

    let schedule: FaultSchedule
    let recorder: HistoryRecorder
    /// Of each 1,000 operations outside calm windows, how many remove everything: 10 against one
    /// server, 1 against a cluster, where each fences the 16,384 slots (seconds, during which the
    /// machine's lookups skip Redis and its later writes wait): at 1 %, the machines hardly read
    /// Redis at all.
    var removeAllPerMille = 10

    /// A machine's process, used by one task at a time (the machine's own task, then the test's).
    final class Machine: @unchecked Sendable {
        let index: Int
        let node: FleetNode
        /// Whether the nemesis has killed the machine's process and not yet started it again
        /// (``FaultHistory/Fault/Kind/killMachine``); set before the kill, cleared after the start.
        let isDown = Atomic<Bool>(false)
        /// How many times the nemesis has killed the process (a call that fails after this moved
        /// was cut short by a kill, even if the machine runs again by the time it is looked at).
        let kills = Atomic<Int>(0)

        init(index: Int, node: FleetNode) {
            self.index = index
            self.node = node
        }
    }

    /// Runs `machine`'s operations until the schedule's end: any operation outside calm windows;
    /// in one, local reads, then one write of each key the machine owns (`k<i>` and `k<i+3>`;
    /// in the run's last window `k<i>` alone), then reads.
    func run(_ machine: Machine, seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed ^ (UInt64(machine.index + 1) &* 0xD1B5_4A32_D192_ED03))
        var count = 0
        // The calm window whose writes this machine made, and those it has still to make.
        var calmWindow = -1.0
        var owed: [String] = []
        while recorder.now < schedule.length {
            // A machine the nemesis killed makes no call until it runs again (its bound: the
            // fault's); waited for before the phase is read, so that a write chosen for a normal
            // moment is not sent in a calm window.
            while machine.isDown.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(10)) }
            let now = recorder.now
            let phase = schedule.phase(at: now)
            let key = Self.keys.randomElement(using: &random) ?? "k0"
            let roll = Int.random(in: 0..<1_000, using: &random)
            count += 1
            let value = "n\(machine.index).\(count)"
            let command: Command
            switch phase {
            case .hush: command = .get(key)
            case .reads: command = roll < 500 ? .get(key) : .load(key, value)
            case .writes:
                // One write of each key this machine owns (k<i> and k<i+3>), so that each key has
                // one write in the window for R4 to judge the reads after it by.
                // In the run's last window, k0…k2 alone: k3…k5 end as the faults left them, for
                // R2 and R3 to judge.
                if let window = schedule.calm.last(where: { $0.start <= now })?.start, window != calmWindow {
                    calmWindow = window
                    let last = window == schedule.calm.last?.start
                    owed = Self.keys.indices.filter { $0 % 3 == machine.index % 3 && !(last && $0 >= 3) }
                        .map { Self.keys[$0] }
                }
                if owed.isEmpty {
                    command = .get(key)
                } else {
                    let owned = owed.removeFirst()
                    switch roll {
                    case ..<650: command = .put(owned, value)
                    case ..<850: command = .remove(owned)
                    default: command = .load(owned, value)
                    }
                }
            case .normal:
                switch roll {
                case ..<300: command = .put(key, value)
                case ..<560: command = .load(key, value)
                case ..<810: command = .get(key)
                case ..<930: command = .remove(key)
                case ..<(1_000 - removeAllPerMille): command = .removeTag(Self.tags[key] ?? "t0")
                default: command = .removeAll
                }
            }
            recorder.record(try await perform(command, on: machine))
            // Pacing (a few operations a second per key), not synchronisation.
            try await Task.sleep(for: .milliseconds(Int.random(in: 2...20, using: &random)))
        }
    }

    /// One operation of the workload.
    enum Command: Sendable {
        case put(String, String)
        case load(String, String)
        case get(String)
        case remove(String)
        case removeTag(String)
        case removeAll
    }

    /// Sends `command` to `machine` and records what it answered, between the moment it was sent
    /// and the moment its answer was read. Every answer is checked before use: one not understood
    /// is recorded verbatim in ``FaultHistory/Operation/error``.
    func perform(_ command: Command, on machine: Machine, isFinal: Bool = false) async throws -> FaultHistory.Operation {
        var operation = FaultHistory.Operation(node: machine.index, kind: .get, start: 0, end: 0, isFinal: isFinal)
        let line: String
        switch command {
        case .put(let key, let value):
            (operation.kind, operation.key, operation.value) = (.put, key, value)
            line = "put \(key) \(value) \(Self.tags[key] ?? "t0")"
        case .load(let key, let value):
            (operation.kind, operation.key, operation.value) = (.load, key, value)
            line = "load \(key) \(value) \(Self.tags[key] ?? "t0")"
        case .get(let key):
            (operation.kind, operation.key) = (.get, key)
            line = "get \(key)"
        case .remove(let key):
            (operation.kind, operation.key) = (.remove, key)
            line = "rm \(key)"
        case .removeTag(let tag):
            (operation.kind, operation.tag) = (.removeTag, tag)
            line = "rmtag \(tag)"
        case .removeAll:
            operation.kind = .removeAll
            line = "rmall"
        }
        let kills = machine.kills.load(ordering: .acquiring)
        operation.start = recorder.now
        let answer: String
        do {
            answer = try await machine.node.ask(line)
        } catch where machine.isDown.load(ordering: .acquiring) || machine.kills.load(ordering: .acquiring) != kills {
            // Killed under way: it may or may not have written.
            operation.end = recorder.now
            operation.error = "killed: \(error)"
            return operation
        }
        operation.end = recorder.now
        switch operation.kind {
        case .put, .remove, .removeAll:
            if answer != "ok" { operation.error = answer }
        case .removeTag:
            if Int(answer) == nil { operation.error = answer }
        case .get:
            if answer.isEmpty || answer.contains(" ") {
                operation.error = answer
            } else if answer != "missing" {
                operation.result = answer
            }
        case .load:
            if let load = try? FleetNode.parseLoad(answer, "n\(machine.index)") {
                operation.result = load.value
                operation.loaded = load.loaded
            } else {
                operation.error = answer
            }
        }
        return operation
    }
}
#endif
