#if Redis
import Foundation
import Synchronization

/// What one run of the fault harness recorded: every operation with its start and end, every
/// fault, and the machines' counts at the end; what ``FaultChecker`` judges, and what a failing
/// run writes out as JSON lines.
///
/// Times are milliseconds since the run started, on the test process's `ContinuousClock` (one
/// host, one monotonic clock for every machine's operations and every fault).
struct FaultHistory: Codable, Sendable, Equatable {
    /// One call a machine made, as the test process saw it: sent at ``start``, answered at ``end``.
    struct Operation: Codable, Sendable, Equatable {
        enum Kind: String, Codable, Sendable {
            /// `put K V TAG`: a strong write of ``value``.
            case put
            /// `load K V TAG`: a get-or-load whose loader answers ``value``.
            case load
            /// `get K`: the local tiers alone.
            case get
            /// `rm K`.
            case remove = "rm"
            /// `rmtag T`.
            case removeTag = "rmtag"
            /// `rmall`.
            case removeAll = "rmall"
        }

        var node: Int
        var kind: Kind
        /// The key, for every kind but `rmtag` and `rmall`.
        var key: String?
        /// The tag of `rmtag`.
        var tag: String?
        /// The value a put writes or a load's loader answers.
        var value: String?
        var start: Double
        var end: Double
        /// What a load or get returned; nil: a miss (`get`), or nothing understood.
        var result: String?
        /// Whether a load's loader ran (nil when the answer was not understood).
        var loaded: Bool?
        /// An answer that was not understood, verbatim (the operation then may or may not have
        /// written: the checker treats it as either).
        var error: String?
        /// One of the final loads (after the last fault healed).
        var isFinal = false
    }

    /// A fault the nemesis injected, from just before it was applied to just after it was healed.
    struct Fault: Codable, Sendable, Equatable {
        enum Kind: String, Codable, Sendable, CaseIterable {
            /// One machine's proxy passes nothing (a partition from Redis that heals).
            case blackHole
            /// One machine's replies arrive late.
            case delayReplies
            /// One machine's replies are lost (its connections reset when this heals).
            case dropReplies
            /// One machine's link is slow.
            case bandwidth
            /// One machine's connections are reset (an instant).
            case reset
            /// `CONFIG SET maxmemory 1` with `noeviction`: writes refused with `-OOM`.
            case outOfMemory
            /// `CLIENT PAUSE … WRITE`: writes wait.
            case pauseWrites
            /// `SIGSTOP` of `redis-server`: nothing answers.
            case stopServer
            /// `redis-server` restarted with its data, loading it slowly: down, then `-LOADING`.
            case restartLoading
            /// In a cluster: a manual failover (`CLUSTER FAILOVER`) of one primary to its replica,
            /// and back when it heals.
            case failover
            /// `SIGKILL` of `redis-server`, started again with no data when it heals (no
            /// persistence, as a cache's Redis often runs): everything it held is lost.
            case killServer
            /// In a cluster: `SIGKILL` of one primary; its replica takes over (node timeout 1 s);
            /// started again when it heals, it rejoins as a replica. What the primary acknowledged
            /// and had not yet replicated is lost.
            case killPrimary
            /// `SIGSTOP` of one machine's process (`SIGCONT` when it heals): its leases, its
            /// subscription and its commands in flight stand still.
            case stopMachine
            /// `SIGKILL` of one machine's process, started again on its directory when it heals:
            /// the changes it had not yet sent to Redis are lost.
            case killMachine

            /// Whether the fault may lose what Redis acknowledged, or (``killMachine``) what the
            /// machine it acts on had not yet sent.
            var losesData: Bool { self == .killServer || self == .killPrimary || self == .killMachine }
        }

        var kind: Kind
        /// The machine whose proxy it acts on; nil for the server's faults.
        var node: Int?
        /// A parameter (a delay, a rate), for reading.
        var detail: String = ""
        /// The hash slots the killed primary served (``Kind/killPrimary``; nil: unknown, any).
        var slots: [ClosedRange<Int>]?
        /// The refused writes the machines counted from just before the fault to just before
        /// the next one began (``Kind/outOfMemory``; nil: not sampled).
        var refusedCounted: Int?
        var start: Double
        var end: Double
    }

    var seed: UInt64
    var nodes: Int
    /// The machines' namespace in Redis (where a key's hash slot comes from).
    var namespace = "fh"
    /// Each key's one tag.
    var tags: [String: String]
    var operations: [Operation] = []
    var faults: [Fault] = []
    /// Each machine's `stats` counts after the final loads (`dropped=`, `refused=`, `pending=`…).
    var finalStats: [[String: Int]] = []
    /// How far the wall clock (which versions read) and the monotonic clock (which the history
    /// reads) moved apart during the run, in milliseconds.
    var clockDrift: Double = 0

    /// The history as JSON lines: a header, then one line per fault and per operation in start
    /// order.
    func jsonLines() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        func line(_ value: some Encodable) -> String {
            (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
        struct Header: Encodable {
            var seed: UInt64
            var nodes: Int
            var tags: [String: String]
            var finalStats: [[String: Int]]
            var clockDrift: Double
        }
        var lines = [line(Header(seed: seed, nodes: nodes, tags: tags, finalStats: finalStats, clockDrift: clockDrift))]
        lines += faults.sorted { $0.start < $1.start }.map { line(["fault": $0]) }
        lines += operations.sorted { $0.start < $1.start }.map { line(["op": $0]) }
        return lines.joined(separator: "\n") + "\n"
    }
}

extension FaultHistory.Operation: CustomStringConvertible {
    /// One line for a violation report: `n1 put k3=n1.42 [12.0, 12.3]`.
    var description: String {
        var text = "n\(node) \(isFinal ? "final " : "")\(kind.rawValue)"
        if let key { text += " \(key)" }
        if let tag { text += " \(tag)" }
        if let value { text += (kind == .put ? "=" : " ") + value }
        switch kind {
        case .load: text += " -> \(result ?? "?") loaded=\(loaded.map { $0 ? "1" : "0" } ?? "?")"
        case .get: text += " -> \(result ?? "missing")"
        default: break
        }
        if let error { text += " error \(error)" }
        return text + String(format: " [%.1f, %.1f] ms", start, end)
    }
}

extension FaultHistory.Fault: CustomStringConvertible {
    var description: String {
        "\(kind.rawValue)\(node.map { " n\($0)" } ?? "")\(detail.isEmpty ? "" : " \(detail)")"
            + String(format: " [%.1f, %.1f] ms", start, end)
    }
}

/// Collects a run's operations and faults from the machines' tasks and the nemesis, with times
/// relative to one start on the monotonic clock.
final class HistoryRecorder: Sendable {
    let start: ContinuousClock.Instant
    private let operations = Mutex<[FaultHistory.Operation]>([])
    private let faults = Mutex<[FaultHistory.Fault]>([])

    init(start: ContinuousClock.Instant = .now) {
        self.start = start
    }

    /// Milliseconds from the start to `instant`.
    func milliseconds(_ instant: ContinuousClock.Instant) -> Double {
        let (seconds, attoseconds) = (instant - start).components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }

    /// Milliseconds since the start.
    var now: Double { milliseconds(.now) }

    func record(_ operation: FaultHistory.Operation) { operations.withLock { $0.append(operation) } }
    func record(_ fault: FaultHistory.Fault) { faults.withLock { $0.append(fault) } }

    var recordedOperations: [FaultHistory.Operation] { operations.withLock { $0 } }
    var recordedFaults: [FaultHistory.Fault] { faults.withLock { $0 } }
}
#endif
