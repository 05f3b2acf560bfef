/// How a ``RedisStore`` reaches its server.
enum RedisTransport: Sendable {
    /// TCP to 127.0.0.1, Nagle's algorithm off: what a client on the same host uses by default.
    case loopbackTCP
    /// The server's Unix domain socket: no TCP/IP stack, so each round trip is cheaper.
    case unixSocket

    /// As the report names it.
    var label: String {
        switch self {
        case .loopbackTCP: return "loopback TCP"
        case .unixSocket: return "unix socket"
        }
    }
}

/// `Redis`: a redis-server of the harness's own (persistence off) over one connection, loopback
/// TCP or its Unix domain socket, one request at a time, or pipelined: `pipelineDepth` commands
/// sent together, then their replies read. Each store uses a database of its own, emptied when
/// opened.
final class RedisStore: DiskSystem {
    let name = "Redis"
    let transport: RedisTransport
    let pipelineDepth: Int
    private let connection: RESPConnection
    private static let getCommand = Array("GET".utf8)
    private static let setCommand = Array("SET".utf8)

    /// The transport, then the depth when it pipelines: `unix socket, pipelined 100`.
    var variant: String? { Self.variant(transport: transport, pipelineDepth: pipelineDepth) }
    /// Persistence is off: nothing reaches the disk.
    var durability: WriteDurability { .never }
    var directory: String? { nil }

    /// The ``variant`` of a store so driven, for labels known before one is opened.
    static func variant(transport: RedisTransport, pipelineDepth: Int) -> String {
        pipelineDepth > 1 ? "\(transport.label), pipelined \(pipelineDepth)" : transport.label
    }

    init(server: RedisServer, database: Int, transport: RedisTransport, pipelineDepth: Int) throws {
        self.transport = transport
        self.pipelineDepth = pipelineDepth
        switch transport {
        case .loopbackTCP: connection = try RESPConnection(port: server.port)
        case .unixSocket: connection = try RESPConnection(unixSocketPath: server.unixSocketPath)
        }
        connection.append(Array("SELECT".utf8), Array(String(database).utf8))
        connection.append(Array("FLUSHDB".utf8))
        try connection.send()
        try connection.readSimple()
        try connection.readSimple()
    }

    func get(_ key: [UInt8]) throws -> [UInt8]? {
        connection.append(Self.getCommand, key)
        try connection.send()
        return try connection.readBulk()
    }

    func set(_ value: [UInt8], forKey key: [UInt8]) throws {
        connection.append(Self.setCommand, key, value)
        try connection.send()
        try connection.readSimple()
    }

    func get(many keys: ArraySlice<[UInt8]>) throws -> (found: Int, bytes: Int) {
        for key in keys { connection.append(Self.getCommand, key) }
        try connection.send()
        var found = 0
        var bytes = 0
        for _ in keys {
            if let value = try connection.readBulk() {
                found += 1
                bytes += value.count
            }
        }
        return (found, bytes)
    }

    func set(many pairs: [(key: [UInt8], value: [UInt8])]) throws {
        for pair in pairs { connection.append(Self.setCommand, pair.key, pair.value) }
        try connection.send()
        for _ in pairs { try connection.readSimple() }
    }

    func finishWrites() throws {}

    func close() {}

    /// Not used: Redis keeps nothing on disk, so it is not in the workloads that read while
    /// another thread writes.
    func concurrentWriter() throws -> any DiskSystem {
        throw RedisFailure(description: "the Redis peer has no concurrent-writer workload")
    }
}
