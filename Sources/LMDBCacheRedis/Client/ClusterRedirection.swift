#if Redis
/// A Redis Cluster redirection: the error reply a node sends for a key whose slot it does not serve.
///
/// `MOVED 3999 127.0.0.1:6381`: slot 3999 is served by that node from now on (update the slot
/// map, send the command there). `ASK 3999 127.0.0.1:6381`: the slot is being migrated and this
/// key is already on the target: send `ASKING` and the command there, once, without changing the
/// slot map.
struct ClusterRedirection: Sendable, Equatable {
    /// Which of the two redirections.
    enum Kind: Sendable, Equatable {
        /// `MOVED`: the slot has a new owner.
        case moved
        /// `ASK`: this one command goes to the importing node, after `ASKING`.
        case ask
    }

    /// `MOVED` or `ASK`.
    var kind: Kind
    /// The key's slot, in `0..<16384`.
    var slot: Int
    /// The node to send the command to.
    var endpoint: RedisEndpoint

    /// Creates a redirection.
    init(kind: Kind, slot: Int, endpoint: RedisEndpoint) {
        self.kind = kind
        self.slot = slot
        self.endpoint = endpoint
    }

    /// Parses an error reply's message; nil when it is not a well-formed redirection (any other
    /// error, or a `MOVED` whose slot or port is out of range, which is then an ordinary error).
    ///
    /// An empty host (`MOVED 3999 :6381`) or `?` means `source`'s host. The host is what precedes
    /// the last `:`, so an IPv6 address needs no brackets.
    init?(errorMessage message: [UInt8], from source: RedisEndpoint) {
        let parts = message.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        if parts[0].elementsEqual("MOVED".utf8) {
            kind = .moved
        } else if parts[0].elementsEqual("ASK".utf8) {
            kind = .ask
        } else {
            return nil
        }
        guard let slot = Self.decimal(parts[1]), slot < HashSlot.count else { return nil }
        let address = parts[2]
        guard let colon = address.lastIndex(of: UInt8(ascii: ":")),
            let port = Self.decimal(address[address.index(after: colon)...]),
            let endpoint = RedisEndpoint(announcedHost: address[..<colon], port: Int64(port), from: source)
        else { return nil }
        self.slot = slot
        self.endpoint = endpoint
    }

    /// A decimal of one to five digits (slots and ports fit; nothing larger is accepted).
    private static func decimal(_ digits: ArraySlice<UInt8>) -> Int? {
        guard (1...5).contains(digits.count) else { return nil }
        var value = 0
        for digit in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return value
    }
}
#endif
