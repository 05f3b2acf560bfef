import BenchmarkData
import Foundation

// The disk suite: DiskCache beside SQLite (as YYKVStorage), one file per key (as PINDiskCache),
// raw LMDB C calls and Redis, on warm gets and overwriting sets of 100 B and 4 KB values, plus
// synchronous writes.

struct DiskSuite: Suite {
    let name = "disk"

    /// Bytes per value, and the payload each is: 100 B of JSON-like text (below the compression
    /// threshold), 4 KB of JSON-like text (compresses about 3x).
    let payloads: [Payload] = [.json100, .json4K]

    func run(options: Options, log: (String) -> Void) throws -> SuiteReport {
        let entries = options.quick ? 5_000 : 50_000
        let getOperations = options.quick ? 4_000 : 50_000
        let setOperations = options.quick ? 1_000 : 10_000
        let synchronousOperations = options.quick ? 100 : 500
        let repeats = 3
        let root = "\(options.scratchDirectory)/cache-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        var directoryNumber = 0
        func newDirectory(_ name: String) throws -> String {
            directoryNumber += 1
            let path = "\(root)/\(directoryNumber)-\(name)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            return path
        }

        var notes: [String] = []
        var kinds = DiskSystemKind.local
        var server: RedisServer?
        if let executable = RedisServer.executable() {
            let started = try RedisServer(executable: executable)
            server = started
            log("disk: redis-server started on 127.0.0.1:\(started.port) (persistence off)")
            kinds += DiskSystemKind.redis(server: started)
        } else {
            let message = "Redis skipped: redis-server is not installed (\(RedisServer.installHint))"
            log("disk: " + message)
            notes.append(message)
        }
        defer { server?.stop() }

        var rows: [ResultRow] = []
        var warnings: [String] = []
        let keys = makeKeys(count: entries + synchronousOperations * repeats, salt: 0xD15C)
        for payload in payloads {
            let pool = payload.pool(count: 256, seed: 7)
            var systems: [any DiskSystem] = []
            for kind in kinds {
                let system = try kind.open(try newDirectory("\(kind.label)-\(payload)"), .standard)
                let started = nanosecondsNow()
                try fill(system, keys: keys[..<entries], pool: pool)
                log(
                    "disk: \(label(system)) \(payload.label): filled \(entries) entries in "
                        + "\(format(Double(nanosecondsNow() - started) / 1e9, decimals: 1)) s")
                systems.append(system)
            }
            defer { for system in systems { system.close() } }

            // Warm gets of present keys in random order, each round a new order.
            var getRuns = [[RunSample]](repeating: [], count: systems.count)
            for round in 0..<repeats {
                let shuffled = shuffle((0..<getOperations).map { $0 % entries }, seed: UInt64(100 + round))
                for step in systems.indices {
                    let index = (round + step) % systems.count
                    getRuns[index].append(try timeGets(systems[index], keys: keys, order: shuffled))
                }
            }
            // Sets over present keys (a new value each time), then whatever makes them durable.
            var setRuns = [[RunSample]](repeating: [], count: systems.count)
            for round in 0..<repeats {
                let order = shuffle((0..<setOperations).map { $0 % entries }, seed: UInt64(200 + round))
                for step in systems.indices {
                    let index = (round + step) % systems.count
                    setRuns[index].append(
                        try timeSets(systems[index], keys: keys, order: order, pool: pool, shift: round + 1))
                }
            }
            for (workload, runs) in [("get", getRuns), ("set", setRuns)] {
                var cell = zip(systems, runs).map { system, runs in
                    summarize(
                        suite: name, system: system.name, variant: system.variant, workload: workload, threads: 1,
                        valueBytes: payload.size, runs: runs)
                }
                cell.computeRatios()
                for row in cell where (row.misses ?? 0) > 0 {
                    warnings.append("\(row.label) missed \(row.misses ?? 0) gets of present keys (\(payload.label))")
                }
                log(
                    "disk: \(workload) \(payload.label): "
                        + cell.map { "\($0.label) \(formatRate($0.opsPerSecond))" }.joined(separator: ", "))
                rows += cell
            }
        }

        // Synchronous writes: each set returns once it is on stable storage.
        let payload = Payload.json100
        let pool = payload.pool(count: 256, seed: 9)
        var synchronous: [(any DiskSystem, [RunSample])] = []
        for kind in kinds where kind.synchronous {
            synchronous.append((try kind.open(try newDirectory("\(kind.label)-sync"), .synchronous), []))
        }
        defer { for (system, _) in synchronous { system.close() } }
        for round in 0..<repeats {
            let first = entries + round * synchronousOperations
            let order = Array(first..<first + synchronousOperations)
            for step in synchronous.indices {
                let index = (round + step) % synchronous.count
                synchronous[index].1.append(
                    try timeSets(synchronous[index].0, keys: keys, order: order, pool: pool, shift: 0))
            }
        }
        var cell = synchronous.map { system, runs in
            summarize(
                suite: name, system: system.name, workload: "set synchronous", threads: 1, valueBytes: payload.size,
                runs: runs)
        }
        cell.computeRatios()
        log(
            "disk: set synchronous: "
                + cell.map { "\($0.label) \(formatRate($0.opsPerSecond))" }.joined(separator: ", "))
        rows += cell
        for warning in warnings { log("disk: WARNING: " + warning) }

        return SuiteReport(
            suite: name,
            parameters: [
                ("entries", "\(entries) per store, filled before timing; keys like item:9f3c0a51d2e4b786 (21 B)"),
                ("values", "100 B and 4 KB of JSON-like text (LMDBCache compresses the 4 KB ones, about 3x)"),
                ("get", "\(getOperations) gets of present keys in random order per run"),
                ("set", "\(setOperations) overwrites of present keys per run, then each system's flush or commit"),
                ("set synchronous", "\(synchronousOperations) inserts of 100 B per run, each durable on return"),
                ("repeats", "\(repeats), interleaved (each round starts one system further along); median reported"),
                ("directory", "\(options.scratchDirectory) (\(fileSystemName(options.scratchDirectory)))"),
            ],
            notes: [
                "ops/s: one thread; get and set throughput includes every call, and for set the final flush "
                    + "(LMDBCache: flush(); LMDB-C: commit and mdb_env_sync).",
                "p50/p99: each operation timed on its own (a pipelined Redis batch: its time / 100). "
                    + "LMDBCache's default set returns once queued; its writer thread commits in batches.",
                "LMDBCache: DiskCache, default configuration (batched: a commit per batch with fdatasync, zlib "
                    + "above 512 B); synchronous: .synchronous durability.",
                "SQLite: system libsqlite3 as YYKVStorage: manifest table with the value inline, WAL, "
                    + "synchronous=NORMAL (FULL when synchronous), prepared statements, access time updated on read.",
                "FilePerKey: a file per key in one directory as PINDiskCache: write to a temporary file and "
                    + "rename; read, then update the file's modification time (the access date).",
                "LMDB-C: raw LMDB C calls, values stored as they are; 1,000 puts a transaction, MDB_NOSYNC, one "
                    + "sync at the end; synchronous: one put per transaction, full sync on commit.",
                "Redis: redis-server 127.0.0.1, persistence off, one connection, RESP over a plain socket; "
                    + "also pipelined (100 commands, then 100 replies). Not in the synchronous workload: "
                    + "without persistence nothing reaches the disk.",
            ] + notes + warnings.map { "WARNING: " + $0 },
            rows: rows)
    }

    private func label(_ system: any DiskSystem) -> String {
        system.variant.map { "\(system.name) (\($0))" } ?? system.name
    }

    /// Stores `pool[i % pool.count]` under each key, pipelined where the system pipelines.
    private func fill(_ system: any DiskSystem, keys: ArraySlice<[UInt8]>, pool: [[UInt8]]) throws {
        if system.pipelineDepth > 1 {
            var start = keys.startIndex
            while start < keys.endIndex {
                let end = min(start + system.pipelineDepth, keys.endIndex)
                try system.set(many: (start..<end).map { (keys[$0], pool[$0 % pool.count]) })
                start = end
            }
        } else {
            for index in keys.indices { try system.set(pool[index % pool.count], forKey: keys[index]) }
        }
        try system.finishWrites()
    }

    /// Times a get of `keys[i]` for each `i` in `order`, one at a time (or a pipeline at a time).
    private func timeGets(_ system: any DiskSystem, keys: [[UInt8]], order: [Int]) throws -> RunSample {
        var times: [UInt64] = []
        times.reserveCapacity(order.count)
        var misses = 0
        var bytes = 0
        let depth = system.pipelineDepth
        let start = nanosecondsNow()
        if depth > 1 {
            let batchKeys = order.map { keys[$0] }
            var first = 0
            while first < batchKeys.count {
                let end = min(first + depth, batchKeys.count)
                let before = nanosecondsNow()
                let (found, got) = try system.get(many: batchKeys[first..<end])
                times.append(nanosecondsNow() - before)
                misses += (end - first) - found
                bytes &+= got
                first = end
            }
        } else {
            for index in order {
                let before = nanosecondsNow()
                let value = try system.get(keys[index])
                times.append(nanosecondsNow() - before)
                if let value { bytes &+= value.count } else { misses += 1 }
            }
        }
        let elapsed = nanosecondsNow() - start
        blackHole(bytes)
        return RunSample(
            operations: order.count, elapsedNanos: elapsed, batchNanos: times, batchSize: depth, misses: misses)
    }

    /// Times a set of `keys[i]` to a pool value for each `i` in `order`, then `finishWrites()`.
    private func timeSets(
        _ system: any DiskSystem, keys: [[UInt8]], order: [Int], pool: [[UInt8]], shift: Int
    ) throws -> RunSample {
        var times: [UInt64] = []
        times.reserveCapacity(order.count)
        let depth = system.pipelineDepth
        let start = nanosecondsNow()
        if depth > 1 {
            let pairs = order.map { (key: keys[$0], value: pool[($0 + shift) % pool.count]) }
            var first = 0
            while first < pairs.count {
                let end = min(first + depth, pairs.count)
                let before = nanosecondsNow()
                try system.set(many: Array(pairs[first..<end]))
                times.append(nanosecondsNow() - before)
                first = end
            }
        } else {
            for index in order {
                let value = pool[(index + shift) % pool.count]
                let before = nanosecondsNow()
                try system.set(value, forKey: keys[index])
                times.append(nanosecondsNow() - before)
            }
        }
        try system.finishWrites()
        let elapsed = nanosecondsNow() - start
        return RunSample(operations: order.count, elapsedNanos: elapsed, batchNanos: times, batchSize: depth, misses: 0)
    }

    private func shuffle(_ values: [Int], seed: UInt64) -> [Int] {
        var random = SplitMix64(seed: seed)
        var values = values
        values.shuffle(using: &random)
        return values
    }
}
