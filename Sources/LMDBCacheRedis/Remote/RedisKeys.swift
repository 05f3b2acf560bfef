#if Redis
/// Where the tier keeps things in Redis, under the configured namespace `ns`:
///
/// | Redis key | holds |
/// |---|---|
/// | `ns:v:KEY` | the entry whose key's bytes are KEY: its record or tombstone with its version (string, expiring with it; ``RedisEnvelope``) |
/// | `ns:t:TAG` | the keys (bytes) of entries carrying the tag stored as TAG (sorted set scored by each entry's end of life), and while a removal of the tag is recent its fence: the member '' (no key is empty) scored by the removal's millisecond |
/// | `ns:tv:TAG`, in a cluster `ns:tv:{T}:TAG` | for each key in `ns:t:TAG`, the version of the newest write that indexed it (hash, in the set's hash slot: ``SlotKeys``), so that a removal of the tag takes off only keys no newer write indexed; it lives as long as the set |
/// | `ns:l:KEY` | KEY's load lease: the holder's random token (string, expiring) |
/// | `ns:f`, in a cluster `ns:f:{T}` | the version of the last ``LMDBCache/Cache/removeAll()`` (string, for a tombstone's life): its fence, one per hash slot in a cluster (``SlotKeys``) |
/// | channel `ns:changes` | every change, encoded as ``LMDBCache/CacheChange`` |
struct RedisKeys: Sendable {
    let namespace: [UInt8]
    let value: [UInt8]
    let tag: [UInt8]
    let lease: [UInt8]
    let channel: [UInt8]

    init(namespace: String) {
        let ns = Array(namespace.utf8)
        self.namespace = ns
        value = ns + Array(":v:".utf8)
        tag = ns + Array(":t:".utf8)
        lease = ns + Array(":l:".utf8)
        channel = ns + Array(":changes".utf8)
    }

    func value(_ key: [UInt8]) -> [UInt8] { value + key }
    func tag(_ tag: [UInt8]) -> [UInt8] { self.tag + tag }
    func lease(_ key: [UInt8]) -> [UInt8] { lease + key }

    /// The entry key a value key names, or nil when it is not one of this namespace's.
    func entryKey(ofValueKey bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count > value.count, bytes.starts(with: value) else { return nil }
        return Array(bytes[value.count...])
    }
}
#endif
