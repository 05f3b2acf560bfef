import Foundation
import PropertyBased

@testable import LMDBCache

/// One operation of a model-based sequence. Indexes pick from the fixed tables below, so a
/// shrunk sequence reads as plain operations and small indexes are the simple cases.
enum ModelStep: Sendable, CustomStringConvertible {
    case insert(key: Int, value: Int, expiry: Int, cost: Int)
    case read(key: Int)
    case remove(key: Int)
    case removeAll
    case trimToCount(Int)
    case trimToCost(Int)
    case trimToAge(Int)
    case removeExpired
    case trimPass
    case flush
    case reopen
    case advance(Int)

    /// Strings that name fewer keys than they look: canonically equal spellings, and keys past
    /// LMDB's 511-byte limit that share a 600-byte prefix (stored under a digest).
    static let keys: [String] = {
        let long = String(repeating: "p", count: 600)
        return [
            "a", "caf\u{E9}", "cafe\u{301}", "\u{212B}", "A\u{30A}", long + "1", long + "2", long + "e\u{301}",
            long + "\u{E9}",
        ]
    }()
    /// Empty, tiny, around a page's worth (4,075 bytes), many pages, and 1 MiB; two contents each.
    static let valueSizes = [0, 1, 100, 4_075, 70_000, 1 << 20]
    static let values: [[UInt8]] = (0..<12).map { index in
        let (size, variant) = (valueSizes[index % 6], index / 6)
        return (0..<size).map { UInt8(truncatingIfNeeded: $0 &* (2 * variant + 3) &+ $0 >> 7 &+ variant) }
    }
    static let expiries: [Duration?] = [
        nil, .seconds(2), .seconds(30), .zero, .milliseconds(-5), .seconds(Int64.max), .seconds(Int64.min),
        .milliseconds(1_500),
    ]
    static let costs: [Int?] = [nil, 0, 1, 100, .max]
    static let countTargets = [0, 1, 2, 5, Int.max]
    static let costTargets = [0, 1, 5_000, 1 << 20, Int.max]
    static let ages: [Duration] = [.zero, .seconds(1), .seconds(30), .seconds(Int64.max), .seconds(Int64.min)]
    static let advances: [Duration] = [
        .milliseconds(1), .seconds(1), .seconds(2), .seconds(31), .seconds(3_600), .seconds(400 * 86_400),
    ]

    /// The step five small numbers stand for (op 0–15 weighs inserts and reads highest).
    init(op: Int, a: Int, b: Int, c: Int, d: Int) {
        switch op {
        case 0...4: self = .insert(key: a % 9, value: b % 12, expiry: c % 8, cost: d % 5)
        case 5...7: self = .read(key: a % 9)
        case 8: self = .remove(key: a % 9)
        case 9: self = .removeAll
        case 10: self = .trimToCount(b % 5)
        case 11: self = .trimToCost(b % 5)
        case 12: self = .trimToAge(c % 5)
        case 13: self = a % 2 == 0 ? .removeExpired : .trimPass
        case 14: self = a % 2 == 0 ? .flush : .reopen
        default: self = .advance(b % 6)
        }
    }

    var description: String {
        func key(_ index: Int) -> String {
            let key = Self.keys[index]
            let shown = key.count > 20 ? "p×600+" + String(key.dropFirst(600)) : key
            return "\""
                + shown.unicodeScalars.map { $0.isASCII ? String($0) : "\\u{\(String($0.value, radix: 16))}" }
                .joined() + "\""
        }
        switch self {
        case .insert(let k, let v, let e, let c):
            return
                "insert(\(key(k)), \(Self.values[v].count) B #\(v / 6), expires: \(Self.expiries[e].map { "\($0)" } ?? "never"), cost: \(Self.costs[c].map(String.init) ?? "nil"))"
        case .read(let k): return "read(\(key(k)))"
        case .remove(let k): return "remove(\(key(k)))"
        case .removeAll: return "removeAll"
        case .trimToCount(let t): return "trim(toCount: \(Self.countTargets[t]))"
        case .trimToCost(let t): return "trim(toCost: \(Self.costTargets[t]))"
        case .trimToAge(let t): return "trim(toAge: \(Self.ages[t]))"
        case .removeExpired: return "removeExpired"
        case .trimPass: return "trimPass"
        case .flush: return "flush"
        case .reopen: return "close and reopen"
        case .advance(let t): return "clock += \(Self.advances[t])"
        }
    }
}

/// A configuration variant and the steps to run on it.
struct ModelCase: Sendable, CustomStringConvertible {
    let variant: Int
    let steps: [ModelStep]

    var description: String {
        "variant \(variant), \(steps.count) steps:\n"
            + steps.enumerated().map { "  \($0): \($1)" }.joined(separator: "\n")
    }

    /// Up to `maxSteps` steps on one of `variants` configurations; shrinks by dropping steps and
    /// moving each step's numbers towards 0.
    static func generator(variants: Int, maxSteps: Int = 30)
        -> Generator<ModelCase, AnySequence<(Int, [(Int, Int, Int, Int, Int)])>>
    {
        let step = zip(
            Gen.int(in: 0...15), Gen.int(in: 0...8), Gen.int(in: 0...11), Gen.int(in: 0...7), Gen.int(in: 0...4)
        ).map { raw in ModelStep(op: raw.0, a: raw.1, b: raw.2, c: raw.3, d: raw.4) }
        return zip(Gen.int(in: 0...(variants - 1)), step.array(of: 1...maxSteps))
            .map { variant, steps in ModelCase(variant: variant, steps: steps) }.eraseToAnySequence()
    }
}
