#if Redis
import RESP

/// Which primary serves each of a Redis Cluster's 16384 hash slots, and that primary's replicas.
///
/// Built from a `CLUSTER SLOTS` reply, which is untrusted: a reply of the wrong shape, a slot
/// outside `0..<16384`, overlapping ranges, a port outside `1...65535` or an unusable host name
/// is refused as a whole (`RedisClientError.protocolViolation`), never partly applied. A `MOVED`
/// redirection updates one slot's owner in place (``assign(slot:to:)``) until the next refresh.
struct ClusterTopology: Sendable, Equatable {
    /// The primaries that own a slot, or owned one, in the order first seen.
    private(set) var primaries: [RedisEndpoint]
    /// The replicas of each primary, as the reply listed them.
    private(set) var replicas: [RedisEndpoint: [RedisEndpoint]]
    /// Per slot, an index into `primaries`; `unowned`: no node serves the slot.
    private var owners: [UInt16]

    private static let unowned = UInt16.max

    /// A topology in which no slot is served.
    init() {
        primaries = []
        replicas = [:]
        owners = Array(repeating: Self.unowned, count: HashSlot.count)
    }

    /// Parses a `CLUSTER SLOTS` reply that `source` sent.
    ///
    /// Each entry is `[first slot, last slot, primary, replica…]`, a node being
    /// `[host, port, id?, metadata?…]` (fields after the port are ignored). An empty host, `?`
    /// or a null host stands for `source`'s host, as the specification says.
    ///
    /// - Throws: `RedisClientError.protocolViolation` when the reply is not a valid slot map.
    init(clusterSlots reply: RESPValue, from source: RedisEndpoint) throws(RedisClientError) {
        self.init()
        guard case .array(let entries?) = reply else { throw Self.violation("the reply is not an array") }
        guard entries.count <= HashSlot.count else { throw Self.violation("more ranges than slots") }
        for entry in entries {
            guard case .array(let fields?) = entry, fields.count >= 3 else {
                throw Self.violation("a range is not an array of at least three elements")
            }
            guard case .integer(let first) = fields[0], case .integer(let last) = fields[1],
                (0..<Int64(HashSlot.count)).contains(first), (0..<Int64(HashSlot.count)).contains(last),
                first <= last
            else { throw Self.violation("a range's bounds are not slots in order") }
            let primary = try Self.node(fields[2], from: source)
            let index = primaryIndex(of: primary)
            for slot in Int(first)...Int(last) {
                guard owners[slot] == Self.unowned else { throw Self.violation("slot \(slot) is in two ranges") }
                owners[slot] = index
            }
            var nodeReplicas = replicas[primary] ?? []
            for field in fields[3...] {
                let replica = try Self.node(field, from: source)
                if !nodeReplicas.contains(replica) { nodeReplicas.append(replica) }
            }
            replicas[primary] = nodeReplicas
        }
    }

    /// Whether no slot is served: what a node that has not joined a cluster answers.
    var isEmpty: Bool { !owners.contains { $0 != Self.unowned } }

    /// The number of slots some primary serves; 16384 when the cluster covers every slot.
    var coveredSlotCount: Int { owners.count { $0 != Self.unowned } }

    /// Every node named: the primaries, then their replicas, each once.
    var endpoints: [RedisEndpoint] {
        var all = primaries
        for primary in primaries {
            for replica in replicas[primary] ?? [] where !all.contains(replica) { all.append(replica) }
        }
        return all
    }

    /// The primary serving `slot`, or nil when no node does (or `slot` is not a slot).
    func primary(forSlot slot: Int) -> RedisEndpoint? {
        guard owners.indices.contains(slot) else { return nil }
        let index = owners[slot]
        return index == Self.unowned ? nil : primaries[Int(index)]
    }

    /// Records that `endpoint` now serves `slot` (a `MOVED` redirection said so).
    mutating func assign(slot: Int, to endpoint: RedisEndpoint) {
        guard owners.indices.contains(slot) else { return }
        owners[slot] = primaryIndex(of: endpoint)
    }

    /// The index of `endpoint` in `primaries`, appending it if it is new.
    private mutating func primaryIndex(of endpoint: RedisEndpoint) -> UInt16 {
        if let index = primaries.firstIndex(of: endpoint) { return UInt16(truncatingIfNeeded: index) }
        // At most one new primary per slot: the count stays below 16384 + 1, far from `unowned`.
        primaries.append(endpoint)
        return UInt16(truncatingIfNeeded: primaries.count - 1)
    }

    /// A node of a `CLUSTER SLOTS` reply: `[host, port, …]`.
    private static func node(_ value: RESPValue, from source: RedisEndpoint) throws(RedisClientError) -> RedisEndpoint {
        guard case .array(let fields?) = value, fields.count >= 2 else {
            throw violation("a node is not an array of at least two elements")
        }
        let host: [UInt8]
        switch fields[0] {
        case .bulkString(let bytes?), .simpleString(let bytes): host = bytes
        case .bulkString(nil), .null: host = []
        default: throw violation("a node's host is not a string")
        }
        guard case .integer(let port) = fields[1] else { throw violation("a node's port is not an integer") }
        guard let endpoint = RedisEndpoint(announcedHost: host[...], port: port, from: source) else {
            throw violation("a node's host or port is not usable")
        }
        return endpoint
    }

    private static func violation(_ reason: String) -> RedisClientError {
        .protocolViolation("CLUSTER SLOTS: \(reason)")
    }
}

extension RedisEndpoint {
    /// The longest host name accepted from a server: DNS's limit.
    static let maximumAnnouncedHostLength = 255

    /// An endpoint a cluster node announced (in `CLUSTER SLOTS`, `MOVED` or `ASK`), or nil when
    /// the port is outside `1...65535` or the host is not printable UTF-8 of at most 255 bytes.
    ///
    /// An empty host or `?` means "the host you asked": `source`'s.
    init?(announcedHost host: ArraySlice<UInt8>, port: Int64, from source: RedisEndpoint) {
        guard (1...65535).contains(port) else { return nil }
        if host.isEmpty || host.elementsEqual("?".utf8) {
            self.init(host: source.host, port: Int(port))
            return
        }
        guard host.count <= Self.maximumAnnouncedHostLength, host.allSatisfy({ $0 > 0x20 && $0 != 0x7F }),
            let name = String(validating: host, as: UTF8.self)
        else { return nil }
        self.init(host: name, port: Int(port))
    }
}
#endif
