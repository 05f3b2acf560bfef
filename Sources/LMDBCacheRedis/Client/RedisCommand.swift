#if Redis
/// One Redis command: its arguments as bytes (`["SET", key, value, "PX", "1000"]`), and the key
/// that routes it in a cluster (nil: any node).
struct RedisCommand: Sendable, Hashable {
    /// The command name and its arguments, each sent as a bulk string exactly as given.
    var arguments: [[UInt8]]
    /// The key whose hash slot decides the node in a cluster; nil when any node may run it.
    var key: [UInt8]?

    /// A command of `arguments` (its name first), routed by `key` in a cluster (default: any node).
    init(_ arguments: [[UInt8]], key: [UInt8]? = nil) {
        self.arguments = arguments
        self.key = key
    }

    /// A command named `name` (sent as its UTF-8) with binary `arguments`, routed by `key` in a
    /// cluster (default: any node): `RedisCommand("GET", key, key: key)`.
    init(_ name: String, _ arguments: [UInt8]..., key: [UInt8]? = nil) {
        self.init([Array(name.utf8)] + arguments, key: key)
    }
}
#endif
