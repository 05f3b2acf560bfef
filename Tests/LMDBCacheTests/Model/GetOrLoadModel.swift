import Foundation
import PropertyBased

import LMDBCacheStorage

@testable import LMDBCache

/// One step of a get-or-load sequence. Indexes pick from the fixed tables of ``LoadModel``, so a
/// shrunk sequence reads as plain operations and small numbers are the simple cases.
enum LoadStep: Sendable, CustomStringConvertible {
    /// A single-key get-or-load (`value(forKey:expiresAfter:freshness:load:)`) in a child task.
    case get(key: Int, mode: Int, expiry: Int)
    /// A bulk get-or-load (`values(forKeys:expiresAfter:freshness:tags:load:)`) of the keys in
    /// `keys` (a bit mask) in a child task.
    case bulk(keys: Int, tags: Int, mode: Int, expiry: Int)
    case insert(key: Int, tags: Int, expiry: Int)
    case remove(key: Int)
    case removeTag(Int)
    case removeAll
    /// Moves the cache's clock and the timeout clock on together.
    case advance(Int)
    /// Lets the `index`-th pending loader call (in call order) return with an outcome.
    case release(index: Int, outcome: Int)
    /// A change made through the second cache on the directory, then followed by the first:
    /// 0 insert, 1 remove, 2 removeAll(taggedWith:), 3 removeAll.
    case other(op: Int, key: Int, tags: Int)

    init(op: Int, a: Int, b: Int, c: Int) {
        switch op {
        case 0...4: self = .get(key: a % 4, mode: b % LoadModel.modes.count, expiry: c % 2)
        case 5...6: self = .bulk(keys: a % 15 + 1, tags: c % 4, mode: b % 3, expiry: c / 2 % 2)
        case 7...8: self = .insert(key: a % 4, tags: c % 4, expiry: b % 2)
        case 9: self = .remove(key: a % 4)
        case 10: self = .removeTag(a % 2)
        case 11: self = .removeAll
        case 12...13: self = .advance(b % LoadModel.advances.count)
        case 14...17: self = .release(index: a % 4, outcome: b % 5)
        default: self = .other(op: c % 4, key: a % 4, tags: b % 4)
        }
    }

    var description: String {
        func tags(_ mask: Int) -> String { "[" + LoadModel.tags(mask).sorted().joined(separator: ", ") + "]" }
        func expiry(_ e: Int) -> String { LoadModel.expiries[e].map { "\($0)" } ?? "never" }
        switch self {
        case .get(let k, let m, let e):
            return "get(\(LoadModel.keys[k]), \(LoadModel.modes[m].name), expires: \(expiry(e)))"
        case .bulk(let mask, let t, let m, let e):
            return
                "bulk(\(LoadModel.keys(mask)), tags: \(tags(t)), \(LoadModel.modes[m].name), expires: \(expiry(e)))"
        case .insert(let k, let t, let e):
            return "insert(\(LoadModel.keys[k]), tags: \(tags(t)), expires: \(expiry(e)))"
        case .remove(let k): return "remove(\(LoadModel.keys[k]))"
        case .removeTag(let t): return "removeAll(taggedWith: \(LoadModel.tagNames[t]))"
        case .removeAll: return "removeAll"
        case .advance(let t): return "clocks += \(LoadModel.advances[t])"
        case .release(let i, let o): return "release(pending #\(i), outcome \(o): \(LoadModel.outcomeNames[o]))"
        case .other(let op, let k, let t):
            switch op {
            case 0: return "second cache: insert(\(LoadModel.keys[k]), tags: \(tags(t))); follow"
            case 1: return "second cache: remove(\(LoadModel.keys[k])); follow"
            case 2: return "second cache: removeAll(taggedWith: \(LoadModel.tagNames[k % 2])); follow"
            default: return "second cache: removeAll; follow"
            }
        }
    }
}

/// A get-or-load sequence.
struct LoadCase: Sendable, CustomStringConvertible {
    let steps: [LoadStep]

    var description: String {
        "\(steps.count) steps:\n" + steps.enumerated().map { "  \($0): \($1)" }.joined(separator: "\n")
    }

    /// Up to `maxSteps` steps; shrinks by dropping steps and moving each step's numbers towards 0.
    static func generator(maxSteps: Int = 24) -> Generator<LoadCase, AnySequence<[(Int, Int, Int, Int)]>> {
        let step = zip(Gen.int(in: 0...19), Gen.int(in: 0...14), Gen.int(in: 0...5), Gen.int(in: 0...3))
            .map { raw in LoadStep(op: raw.0, a: raw.1, b: raw.2, c: raw.3) }
        return step.array(of: 1...maxSteps).map { LoadCase(steps: $0) }.eraseToAnySequence()
    }
}

/// The tables the steps pick from. Lifetimes end on half seconds and the clocks move by whole
/// seconds, so no check lands on a boundary.
enum LoadModel {
    static let keys = ["k0", "k1", "k2", "k3"]
    static let tagNames = ["t0", "t1"]
    static let expiries: [Duration?] = [nil, .milliseconds(20_500)]
    static let refreshAfter = Duration.milliseconds(10_500)
    static let staleFor = Duration.milliseconds(30_250)
    static let softTimeout = Duration.milliseconds(1_500)
    static let hardTimeout = Duration.milliseconds(2_500)
    static let advances: [Duration] = [.seconds(1), .seconds(2), .seconds(11), .seconds(25), .seconds(40)]
    static let outcomeNames = [
        "value (bulk: every key)", "value tagged t0 (bulk: first key left out)", "value tagged t1 (bulk: error)",
        "error (bulk: every key left out)", "not cacheable (bulk: error)",
    ]

    struct Mode: Sendable {
        let name: String
        let freshness: Freshness
    }

    /// The freshness options of a get (the bulk steps use the first three).
    static let modes: [Mode] = [
        Mode(name: "plain", freshness: Freshness()),
        Mode(name: "refreshAfter", freshness: Freshness(refreshAfter: refreshAfter)),
        Mode(name: "staleIfError", freshness: Freshness(staleIfError: staleFor)),
        Mode(name: "staleIfError+timeout", freshness: Freshness(staleIfError: staleFor, timeout: softTimeout)),
        Mode(name: "hardTimeout", freshness: Freshness(hardTimeout: hardTimeout)),
        Mode(
            name: "staleIfError+timeout+hardTimeout",
            freshness: Freshness(staleIfError: staleFor, timeout: softTimeout, hardTimeout: hardTimeout)),
    ]

    static func keys(_ mask: Int) -> [String] { keys.indices.filter { mask & (1 << $0) != 0 }.map { keys[$0] } }
    static func tags(_ mask: Int) -> Set<String> {
        Set(tagNames.indices.filter { mask & (1 << $0) != 0 }.map { tagNames[$0] })
    }
}

/// The loaders' failure: names the loader call that threw.
struct LoaderFailure: Error, CustomStringConvertible {
    let call: Int
    var description: String { "loader call L\(call) failed" }
}

/// Loaders the test controls: each call records its keys and the keys' generations (the test's
/// count of writes and removals covering each key), then waits until the test releases it with an
/// outcome.
final class ControlledLoaders: Sendable {
    enum Outcome: Sendable {
        case value(String, tags: Set<String>, cacheable: Bool)
        case values([String: String])
        case failure
    }

    struct Call: Sendable {
        let id: Int
        let keys: [String]
        let generations: [Int]
    }

    private struct State {
        var calls: [Call] = []
        var continuations: [Int: CheckedContinuation<Outcome, Never>] = [:]
        var outcomes: [Int: Outcome] = [:]
        var released: Set<Int> = []
        /// After a failed sequence: every call, now and later, fails at once.
        var draining = false
        var generations: [String: Int] = [:]
    }

    private let state = Locked(State())

    var calls: [Call] { state.withLock { $0.calls } }
    var callCount: Int { state.withLock { $0.calls.count } }

    func setGeneration(_ key: String, _ generation: Int) {
        state.withLock { $0.generations[key] = generation }
    }

    /// Records a call and waits for its outcome.
    func call(_ keys: [String]) async -> (id: Int, outcome: Outcome) {
        let id = state.withLock { state in
            let id = state.calls.count + 1
            state.calls.append(Call(id: id, keys: keys, generations: keys.map { state.generations[$0] ?? 0 }))
            if state.draining { state.outcomes[id] = .failure }
            return id
        }
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let ready = state.withLock { state -> Outcome? in
                if let outcome = state.outcomes.removeValue(forKey: id) { return outcome }
                state.continuations[id] = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        return (id, outcome)
    }

    func release(_ id: Int, with outcome: Outcome) {
        let continuation = state.withLock { state in
            state.released.insert(id)
            guard let continuation = state.continuations.removeValue(forKey: id) else {
                state.outcomes[id] = outcome
                return nil as CheckedContinuation<Outcome, Never>?
            }
            return continuation
        }
        continuation?.resume(returning: outcome)
    }

    /// Fails every call not yet released, and every later one (cleaning up after a failure).
    func drain() {
        let waiting = state.withLock { state in
            state.draining = true
            for call in state.calls where !state.released.contains(call.id) && state.continuations[call.id] == nil {
                state.outcomes[call.id] = .failure
            }
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for continuation in waiting { continuation.resume(returning: .failure) }
    }

    /// The single-key loader.
    func single(_ key: String) -> @Sendable (LoadContext) async throws -> String {
        { context in
            let (id, outcome) = await self.call([key])
            switch outcome {
            case .value(let value, let tags, let cacheable):
                context.tags = tags
                context.isCacheable = cacheable
                return value
            case .values(let values):
                guard let value = values[key] else { throw LoaderFailure(call: id) }
                return value
            case .failure:
                throw LoaderFailure(call: id)
            }
        }
    }

    /// The bulk loader.
    var bulk: @Sendable ([String]) async throws -> [String: String] {
        { keys in
            let (id, outcome) = await self.call(keys)
            switch outcome {
            case .values(let values): return values
            case .value(let value, _, _): return Dictionary(uniqueKeysWithValues: keys.map { ($0, value) })
            case .failure: throw LoaderFailure(call: id)
            }
        }
    }
}

/// How a caller's task ended, as the test compares it.
enum CallerResult: Equatable, Sendable, CustomStringConvertible {
    case value(String)
    case values([String: String])
    case error(String)

    init(error: any Error) {
        switch error {
        case let failure as LoaderFailure: self = .error("L\(failure.call) failed")
        case CacheError.loadTimedOut: self = .error("loadTimedOut")
        case CacheError.notFound: self = .error("notFound")
        default: self = .error("\(error)")
        }
    }

    var description: String {
        switch self {
        case .value(let v): return "value \(v)"
        case .values(let d):
            return "values [" + d.sorted { $0.key < $1.key }.map { "\($0): \($1)" }.joined(separator: ", ") + "]"
        case .error(let e): return "error \(e)"
        }
    }
}

/// What the cache holds for a key, as the model has it (both tiers agree: no limits, no trimming).
struct ModelEntry: CustomStringConvertible {
    var value: String
    var tags: Set<String>
    var stored: UInt64
    /// 0: never.
    var expires: UInt64
    /// 0: no stale window.
    var staleUntil: UInt64
    /// Which step or load wrote it.
    var origin: String

    init(value: String, tags: Set<String>, now: UInt64, expiresAfter: Duration?, staleFor: Duration?, origin: String) {
        let lifetime = Lifetime(now: now, expiresAfter: expiresAfter, staleFor: staleFor)
        self.value = value
        self.tags = tags
        stored = now
        expires = lifetime.expires
        staleUntil = lifetime.staleUntil
        self.origin = origin
    }

    func isLive(_ now: UInt64) -> Bool { expires == 0 || now < expires }
    /// Past its expiry, within its stale window.
    func isServableStale(_ now: UInt64) -> Bool { !isLive(now) && staleUntil != 0 && now < staleUntil }
    /// Still held in some form (live, or kept for its stale window).
    func isHeld(_ now: UInt64) -> Bool { isLive(now) || isServableStale(now) }

    var description: String { "\(value) (from \(origin), tags \(tags.sorted()))" }
}
