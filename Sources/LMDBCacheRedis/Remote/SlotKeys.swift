#if Redis
import Synchronization

/// Keys that must sit beside another key, in its hash slot, for a script to touch both: a script
/// may only touch keys of one slot in a cluster. On one server one key, `base`, serves every
/// slot; in a cluster there is one key per slot, `base:{T}`, with the hash tag T chosen so that
/// the key falls in that slot, found once by trying tags in turn (about 170,000 tries fill the
/// 16,384 slots).
///
/// Two sets of them: the namespace's fence (`ns:f`), which the write script reads beside a value
/// key, so that a write older than the last ``LMDBCache/Cache/removeAll()`` (or a load's value
/// whose load began before it) does not land even for a key the removal's scan did not find; and
/// the prefixes of the tags' version hashes (`ns:tv`), each beside its tag's sorted set
/// (``RedisKeys``).
final class SlotKeys: Sendable {
    /// The key on one server, and the prefix of the per-slot keys.
    let base: [UInt8]
    let cluster: Bool
    /// The per-slot keys, made on first use (a cluster only).
    private let slotKeys = Mutex<[[UInt8]]?>(nil)

    init(_ base: [UInt8], cluster: Bool) {
        self.base = base
        self.cluster = cluster
    }

    /// The key in `key`'s hash slot.
    func key(beside key: [UInt8]) -> [UInt8] {
        guard cluster else { return base }
        return everyKey()[HashSlot.slot(of: key)]
    }

    /// Every key: one per slot in a cluster, else the one.
    func everyKey() -> [[UInt8]] {
        guard cluster else { return [base] }
        return slotKeys.withLock { keys in
            if let keys { return keys }
            let made = Self.slotKeys(prefix: base + Array(":{".utf8))
            keys = made
            return made
        }
    }

    /// Whether bytes appended to the keys of `base` keep their slot in a cluster: not when the
    /// first `{` of `base` is followed at once by `}` (an empty hash tag, so Redis hashes whole
    /// keys). Otherwise the first `{` opens a hash tag that ends within `base`'s per-slot key.
    static func suffixesKeepSlot(_ base: [UInt8]) -> Bool {
        guard let open = base.firstIndex(of: UInt8(ascii: "{")) else { return true }
        return base.index(after: open) == base.endIndex || base[base.index(after: open)] != UInt8(ascii: "}")
    }

    /// For each slot, a key `prefix` + tag + `}` in that slot. When the prefix holds a hash tag of
    /// its own (a namespace such as `{app}`), every such key, like every value key of the
    /// namespace, falls in that tag's slot, and the key found for it serves every slot. Bytes
    /// appended to such a key keep its slot when ``suffixesKeepSlot(_:)``.
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
