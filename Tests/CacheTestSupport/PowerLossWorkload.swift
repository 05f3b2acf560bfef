import Foundation
import LMDBCache

/// What `cache-test-helper powerloss-write` writes under the power-loss recorder, and how a crash
/// state's contents are judged against what the writer had confirmed.
///
/// Operation `i` sets key `p<(i * 37) % keyCount>` to `KeyedValue.make(key:seed:)` with seed
/// (version) `i + 1`, so versions grow per key and any stored value names its key and version.
public enum PowerLossWorkload {
    public static let keyCount = 120
    public static let operationCount = 400
    /// Operations between two `flush()` calls in `.batched` and `.periodic` modes.
    public static let operationsPerFlush = 30
    /// The files the recorder follows: LMDB's data file and the synced-snapshot record.
    public static let recordedFiles = ["data.mdb", "synced-snapshot"]

    public static func key(ofOperation index: Int) -> String { "p\((index * 37) % keyCount)" }

    public static func value(ofOperation index: Int) -> [UInt8] {
        KeyedValue.make(key: key(ofOperation: index), seed: UInt64(index + 1))
    }

    /// The newest version of each key among the first `count` operations.
    public static func versions(through count: Int) -> [String: UInt64] {
        var versions: [String: UInt64] = [:]
        for index in 0..<min(count, operationCount) { versions[key(ofOperation: index)] = UInt64(index + 1) }
        return versions
    }

    /// What a crash state held for one key.
    public enum Finding: Equatable, Sendable {
        case held
        /// Absent (or an older version) although a confirmed write had put a newer one.
        case missing
        /// Not a value the writer ever wrote for this key.
        case wrong
        /// Absent and never confirmed: allowed.
        case absent
    }

    /// Judges values read back; keeps each version's expected bytes, so a checker that opens many
    /// states builds each value once.
    public final class Judge {
        private var expected: [Int: [UInt8]] = [:]

        public init() {}

        /// Judges `value` read for `key` when the writer had confirmed version `confirmed` (0: none).
        public func judge(_ value: [UInt8]?, key: String, confirmed: UInt64) -> Finding {
            guard let value else { return confirmed == 0 ? .absent : .missing }
            guard let version = PowerLossWorkload.version(of: value, key: key), version >= 1,
                version <= UInt64(operationCount)
            else { return .wrong }
            let operation = Int(version) - 1
            guard PowerLossWorkload.key(ofOperation: operation) == key else { return .wrong }
            let wanted = expected[operation] ?? PowerLossWorkload.value(ofOperation: operation)
            expected[operation] = wanted
            guard value == wanted else { return .wrong }
            return version >= confirmed ? .held : .missing
        }
    }

    /// The seed `KeyedValue` stored after the key, when the value starts with the key.
    static func version(of value: [UInt8], key: String) -> UInt64? {
        let keyBytes = Array(key.utf8)
        let start = 1 + keyBytes.count
        guard value.count >= start + 8, Int(value[0]) == keyBytes.count, Array(value[1..<start]) == keyBytes else {
            return nil
        }
        var seed: UInt64 = 0
        for (shift, byte) in value[start..<(start + 8)].enumerated() { seed |= UInt64(byte) << (8 * shift) }
        return seed
    }

    /// The durability a mode name gives ("batched", "synchronous", "periodic").
    public static func durability(_ name: String) -> DiskCache.Durability? {
        switch name {
        case "batched": .batched
        case "synchronous": .synchronous
        case "periodic": .periodic(syncInterval: .milliseconds(10))
        default: nil
        }
    }
}
