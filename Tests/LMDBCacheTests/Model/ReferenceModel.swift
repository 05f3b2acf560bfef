/// The plain reference a tier is compared with: a dictionary of values with expiry and last-use
/// times, keyed by `String` (so canonically equal spellings are one key, as Swift says).
///
/// Where a limit lets the tier drop entries on its own, entries are marked uncertain: the tier may
/// then lack them, but never hold another value, an expired one or a removed one.
struct ReferenceModel {
    struct Entry {
        var value: [UInt8]
        var cost: Int
        /// Milliseconds since 1970; 0 for never.
        var expires: UInt64
        var accessed: UInt64
        /// The earliest use the tier can have on record: `accessed`, unless ``accessLag`` lets
        /// the tier's record trail it.
        var recorded: UInt64
        var certain: Bool
    }

    /// For a tier that records a use only when the one on record is old enough (the disk tier:
    /// `RecentAccesses`), the most its record may trail a read at a given time; nil for a tier
    /// that records every use.
    var accessLag: ((_ now: UInt64) -> UInt64)?

    /// What the tier must answer for a key.
    enum Expectation: Equatable, CustomStringConvertible {
        case absent
        case present([UInt8])
        case presentOrLost([UInt8])

        func allows(_ actual: [UInt8]?) -> Bool {
            switch self {
            case .absent: return actual == nil
            case .present(let value): return actual == value
            case .presentOrLost(let value): return actual == nil || actual == value
            }
        }

        func allows(contains: Bool) -> Bool {
            switch self {
            case .absent: return !contains
            case .present: return contains
            case .presentOrLost: return true
            }
        }

        var description: String {
            switch self {
            case .absent: return "absent"
            case .present(let value): return "present (\(value.count) B)"
            case .presentOrLost(let value): return "present (\(value.count) B) or evicted"
            }
        }
    }

    private(set) var entries: [String: Entry] = [:]

    /// `duration` in whole milliseconds, 0 for negative, `UInt64.max` past it: worked out in
    /// 128 bits, apart from the library's own arithmetic.
    static func milliseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        let total = Int128(seconds) * 1_000 + Int128(attoseconds / 1_000_000_000_000_000)
        return total <= 0 ? 0 : total >= Int128(UInt64.max) ? .max : UInt64(total)
    }

    static func deadline(_ now: UInt64, _ duration: Duration) -> UInt64 {
        let sum = Int128(now) + Int128(milliseconds(duration))
        return sum >= Int128(UInt64.max) ? .max : UInt64(sum)
    }

    static func isExpired(_ entry: Entry, at now: UInt64) -> Bool {
        entry.expires != 0 && now >= entry.expires
    }

    /// Idle for `age` or longer (the memory tier's age limit); a clock that went back is no idling.
    static func isIdle(_ entry: Entry, age: UInt64?, at now: UInt64) -> Bool {
        guard let age else { return false }
        return now > entry.accessed && now - entry.accessed >= age
    }

    mutating func insert(_ key: String, _ value: [UInt8], cost: Int, expiresAfter: Duration?, now: UInt64) {
        entries[key] = Entry(
            value: value, cost: cost, expires: expiresAfter.map { Self.deadline(now, $0) } ?? 0, accessed: now,
            recorded: now, certain: true)
    }

    /// The answer for `key` at `now`, when entries idle for `age` are not returned.
    func expectation(_ key: String, now: UInt64, idleAge: UInt64? = nil) -> Expectation {
        guard let entry = entries[key], !Self.isExpired(entry, at: now), !Self.isIdle(entry, age: idleAge, at: now)
        else { return .absent }
        return entry.certain ? .present(entry.value) : .presentOrLost(entry.value)
    }

    /// A read found `actual` where the model `expected` it: a hit is a use; a miss of an entry that
    /// could have been evicted means the tier no longer holds it. (An expired entry stays: a tier
    /// may keep it, unreturned, until it trims.)
    mutating func read(_ key: String, found actual: [UInt8]?, expected: Expectation, now: UInt64) {
        if actual != nil, let entry = entries[key] {
            entries[key]?.accessed = now
            // A tier that did not record this use has one on record less than the lag old.
            let lag = accessLag?(now) ?? 0
            entries[key]?.recorded = max(entry.recorded, now > lag ? now - lag : 0)
        } else if case .presentOrLost = expected {
            entries[key] = nil
        }
    }

    /// The tier may have lost `key` (a contains that said no, for an uncertain entry).
    mutating func forget(_ key: String) {
        entries[key] = nil
    }

    mutating func remove(_ key: String) {
        entries[key] = nil
    }

    mutating func removeAll() {
        entries.removeAll()
    }

    mutating func removeExpired(now: UInt64) {
        entries = entries.filter { !Self.isExpired($0.value, at: now) }
    }

    /// Entries idle for `age` or longer go (a trim to an age: the same rule as the age limit);
    /// an entry idle that long only by the use the tier may have on record may go.
    mutating func removeIdle(age: UInt64, now: UInt64) {
        entries = entries.filter { !Self.isIdle($0.value, age: age, at: now) }
        for (key, entry) in entries {
            var recorded = entry
            recorded.accessed = entry.recorded
            if Self.isIdle(recorded, age: age, at: now) { entries[key]?.certain = false }
        }
    }

    /// A limit may have evicted any entry.
    mutating func loseCertainty() {
        for key in entries.keys { entries[key]?.certain = false }
    }

    /// Entries the tier must hold (certain and live), and entries it may hold (any not removed).
    func countBounds(now: UInt64, idleAge: UInt64? = nil) -> ClosedRange<Int> {
        let certain = entries.values.filter {
            $0.certain && !Self.isExpired($0, at: now) && !Self.isIdle($0, age: idleAge, at: now)
        }.count
        return certain...max(certain, entries.count)
    }

    /// The same bounds for total cost, in 128 bits and clamped to `Int.max` like the tier's.
    func costBounds(now: UInt64, idleAge: UInt64? = nil) -> ClosedRange<Int> {
        var certain: Int128 = 0
        var all: Int128 = 0
        for entry in entries.values {
            all += Int128(entry.cost)
            if entry.certain && !Self.isExpired(entry, at: now) && !Self.isIdle(entry, age: idleAge, at: now) {
                certain += Int128(entry.cost)
            }
        }
        return Int(clamping: certain)...Int(clamping: max(certain, all))
    }
}
