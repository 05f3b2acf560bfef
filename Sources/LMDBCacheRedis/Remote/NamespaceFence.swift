#if Redis
import Synchronization

/// Where a removal of everything leaves its fence, for the write script to read beside a value key:
/// a write that is not newer than the last ``Cache/removeAll()`` (or, for a load's value, whose load
/// began before it) must not land, even for a key the removal's scan did not find because the write
/// had not reached Redis yet.
///
/// A script may only touch keys of one hash slot, so in a cluster there is one fence key per slot:
/// `ns:f:{T}`, with the hash tag T chosen so that the key falls in that slot, found once by trying
/// tags in turn (about 170,000 tries fill the 16,384 slots). On one server one key, `ns:f`, serves.
final class NamespaceFence: Sendable {
    /// `ns:f`, and the prefix of the per-slot keys.
    let key: [UInt8]
    let cluster: Bool
    /// The per-slot keys, made on first use (a cluster only).
    private let slotKeys = Mutex<[[UInt8]]?>(nil)

    init(namespace: [UInt8], cluster: Bool) {
        key = namespace + Array(":f".utf8)
        self.cluster = cluster
    }

    /// The fence key in `valueKey`'s hash slot.
    func key(besideValueKey valueKey: [UInt8]) -> [UInt8] {
        guard cluster else { return key }
        return everyKey()[HashSlot.slot(of: valueKey)]
    }

    /// Every fence key: one per slot in a cluster, else the one.
    func everyKey() -> [[UInt8]] {
        guard cluster else { return [key] }
        return slotKeys.withLock { keys in
            if let keys { return keys }
            let made = Self.slotKeys(prefix: key + Array(":{".utf8))
            keys = made
            return made
        }
    }

    /// For each slot, a key `prefix` + tag + `}` in that slot. When the prefix holds a hash tag of
    /// its own (a namespace such as `{app}`), every such key, like every value key of the
    /// namespace, falls in that tag's slot, and the key found for it serves every slot.
    static func slotKeys(prefix: [UInt8]) -> [[UInt8]] {
        func candidate(_ tag: Int) -> [UInt8] { prefix + Array(String(tag, radix: 36).utf8) + [UInt8(ascii: "}")] }
        // A hash tag in the prefix: the tag tried does not count, and every key has one slot.
        guard Array(HashSlot.hashedPart(of: candidate(10))) != Array(HashSlot.hashedPart(of: candidate(11))) else {
            return Array(repeating: candidate(0), count: HashSlot.count)
        }
        var keys = [[UInt8]?](repeating: nil, count: HashSlot.count)
        var missing = HashSlot.count
        var tag = 0
        while missing > 0, tag < 4_000_000 {
            let key = candidate(tag)
            let slot = HashSlot.slot(of: key)
            if keys[slot] == nil {
                keys[slot] = key
                missing -= 1
            }
            tag += 1
        }
        return keys.map { $0 ?? candidate(0) }
    }
}
#endif
