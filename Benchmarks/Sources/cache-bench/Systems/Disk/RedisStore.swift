/// `Redis`: a redis-server of the harness's own (loopback, persistence off) over one connection,
/// one request at a time, or pipelined: `pipelineDepth` commands sent together, then their
/// replies read. Each store uses a database of its own, emptied when opened.
final class RedisStore: DiskSystem {
    let name = "Redis"
    let pipelineDepth: Int
    private let connection: RESPConnection
    private static let getCommand = Array("GET".utf8)
    private static let setCommand = Array("SET".utf8)

    var variant: String? { pipelineDepth > 1 ? "pipelined \(pipelineDepth)" : nil }
    /// Persistence is off: nothing reaches the disk.
    var durability: WriteDurability { .never }
    var directory: String? { nil }

    init(server: RedisServer, database: Int, pipelineDepth: Int) throws {
        self.pipelineDepth = pipelineDepth
        connection = try RESPConnection(port: server.port)
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
