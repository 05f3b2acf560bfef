import BenchmarkData
import Foundation

// The disk suite: DiskCache beside SQLite (as YYKVStorage), one file per key (as PINDiskCache),
// raw LMDB C calls with and without zlib, RocksDB and Redis: warm and cold gets and overwriting
// sets of 100 B and 4 KB values (JSON-like and random), YCSB-A and -B mixes, gets while another
// thread writes, two processes on one store, and synchronous writes. Every row states when its
// writes are durable; the storage table gives each store's compression and size.

struct DiskSuite: Suite {
    let name = "disk"

    /// The values: 100 B of JSON-like text (below the compression threshold), 4 KB of JSON-like
    /// text (compresses about 3x), 4 KB of random bytes (does not compress).
    let payloads: [Payload] = [.json100, .json4K, .random4K]
    /// The payload of the mixes, the read-while-writing and the two-process workloads.
    let mixPayload = Payload.json4K

    /// The thread counts of the concurrent synchronous-writes rows.
    static let synchronousWriters = [8, 32]

    /// How much each workload does per run.
    struct Sizes {
        var entries: Int
        var gets: Int
        var sets: Int
        var coldGets: Int
        var mixOperations: Int
        var synchronousSets: Int
        /// Inserts per run of the concurrent synchronous writers, over all their threads.
        var concurrentSynchronousSets: Int
        /// A get or mix run stops after this long even if it has operations left.
        var seconds: Double

        init(quick: Bool) {
            entries = quick ? 5_000 : 50_000
            gets = quick ? 4_000 : 50_000
            sets = quick ? 1_000 : 10_000
            coldGets = quick ? 200 : 2_000
            mixOperations = quick ? 1_000 : 10_000
            synchronousSets = quick ? 100 : 500
            concurrentSynchronousSets = quick ? 320 : 3_200
            seconds = quick ? 0.2 : 1.0
        }
    }

    /// A store of one kind, open, with the facts the rows repeat.
    final class Store {
        let kind: DiskSystemKind
        var system: any DiskSystem
        let directory: String
        var bytesOnDisk: Int?

        init(kind: DiskSystemKind, system: any DiskSystem, directory: String) {
            self.kind = kind
            self.system = system
            self.directory = directory
        }
    }

    func run(options: Options, log: (String) -> Void) throws -> SuiteReport {
        let sizes = Sizes(quick: options.quick)
        let repeats = options.repeats()
        let root = "\(options.scratchDirectory)/cache-bench-\(getpid())"
        // Owner-only, as LMDBCache asks of its directories (it warns about others).
        try FileManager.default.createDirectory(
            atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: root) }
        var directoryNumber = 0
        func newDirectory(_ name: String) throws -> String {
            directoryNumber += 1
            let safe = name.map { $0.isLetter || $0.isNumber ? $0 : "-" }
            let path = "\(root)/\(directoryNumber)-\(String(safe))"
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            return path
        }

        var notes: [String] = []
        var kinds = DiskSystemKind.local
        var server: RedisServer?
        let redisWanted = options.systems.map { $0.contains { "Redis".hasPrefix($0) || $0.hasPrefix("Redis") } } ?? true
        if !redisWanted {
            // --systems left Redis out: no server to start.
        } else if let executable = RedisServer.executable() {
            let started = try RedisServer(executable: executable)
            server = started
            log(
                "disk: redis-server started on 127.0.0.1:\(started.port) and \(started.unixSocketPath) "
                    + "(persistence off)")
            kinds += DiskSystemKind.redis(server: started)
        } else {
            let message = "Redis skipped: redis-server is not installed (\(RedisServer.installHint))"
            log("disk: " + message)
            notes.append(message)
        }
        defer { server?.stop() }

        if let prefixes = options.systems {
            kinds = kinds.filter { kind in prefixes.contains { kind.label.hasPrefix($0) } }
        }
        var rows: [ResultRow] = []
        var storage: [String: [Payload: Int]] = [:]
        var compressions: [String: String] = [:]
        var durabilities: [String: String] = [:]
        var residency: [String] = []
        let keys = makeKeys(
            count: sizes.entries
                + (sizes.synchronousSets + Self.synchronousWriters.count * sizes.concurrentSynchronousSets)
                    * repeats,
            salt: diskKeySalt)

        /// Summarizes one workload's samples (in `stores`' order) into rows, with ratios.
        func cell(
            _ workload: String, _ payload: Payload, _ stores: [Store], _ samples: [[RunSample]], threads: Int = 1
        ) -> [ResultRow] {
            guard samples.contains(where: { !$0.isEmpty }) else { return [] }
            var cell = zip(stores, samples).map { store, runs in
                var row = summarize(
                    suite: name, system: store.system.name, variant: store.system.variant, workload: workload,
                    threads: threads, valueBytes: payload.size, runs: runs)
                row.valueKind = payload == .random4K ? "random" : "json"
                row.durable = store.system.durability.rawValue
                row.compression = store.system.compression
                row.bytesOnDisk = store.bytesOnDisk
                return row
            }
            cell.computeRatios()
            log(
                "disk: \(workload) \(payload.label)\(threads == 1 ? "" : ", \(threads) threads"): "
                    + cell.map { "\($0.label) \(formatRate($0.opsPerSecond))" }.joined(separator: ", "))
            return cell
        }

        /// Runs `measure` for each store in interleaved rounds, draining each store after its run
        /// and recording LMDBCache's writer CPU time over both.
        func rounds(
            _ workload: String, _ payload: Payload, _ stores: [Store],
            measure: (Store, _ round: Int) throws -> RunSample
        ) throws -> [[RunSample]] {
            if let selected = options.workloads, !selected.contains(workload) {
                return stores.map { _ in [] }
            }
            return try interleavedRounds(
                systems: stores.count, rounds: repeats, seed: options.seed, salt: workloadSalt(workload + payload.label)
            ) { index, round in
                let store = stores[index]
                let measuresWriter = store.system is DiskCacheStore
                let before = measuresWriter ? WriterThreadCPU.byThread() : [:]
                let updatesBefore = AccessUpdates.count
                // Writes to files count in this process only for stores in it (not Redis's server,
                // nor the two-process workload's second process).
                let countsWrites = store.system.directory != nil && workload != "two processes"
                let writesBefore = countsWrites ? ProcessWrites.bytes() : nil
                var sample = try measure(store, round)
                try store.system.drain()
                if let writesBefore, let writesAfter = ProcessWrites.bytes(), writesAfter >= writesBefore {
                    sample.bytesWritten = writesAfter - writesBefore
                }
                if measuresWriter {
                    sample.writerCPUNanoseconds = WriterThreadCPU.spent(from: before, to: WriterThreadCPU.byThread())
                    sample.accessUpdates = AccessUpdates.count - updatesBefore
                }
                return sample
            }
        }

        for payload in payloads {
            let pool = payload.pool(count: 256, seed: 7)
            var stores: [Store] = []
            for kind in kinds {
                let directory = try newDirectory("\(kind.label)-\(payload)")
                let system = try kind.open(directory, .standard)
                let started = nanosecondsNow()
                // The fill is the set workload over every entry, untimed: pool[i % 256] under key i.
                _ = try DiskWorkloads.sets(system, keys: keys, order: Array(0..<sizes.entries), pool: pool, shift: 0)
                try system.drain()
                let store = Store(kind: kind, system: system, directory: directory)
                if system.directory != nil {
                    store.bytesOnDisk = StoreFiles.bytesOnDisk(directory)
                    storage[kind.label, default: [:]][payload] = store.bytesOnDisk
                }
                compressions[kind.label] = system.compression
                durabilities[kind.label] = system.durability.rawValue
                log(
                    "disk: \(kind.label) \(payload.label): filled \(sizes.entries) entries in "
                        + "\(format(Double(nanosecondsNow() - started) / 1e9, decimals: 1)) s")
                stores.append(store)
            }
            defer { for store in stores { store.system.close() } }

            // Warm gets of present keys, each round in a new order.
            let gets = try rounds("get", payload, stores) { store, round in
                let order = shuffledIndices(count: sizes.entries, seed: UInt64(100 + round))
                return try DiskWorkloads.gets(
                    store.system, keys: keys, order: Array(order.prefix(sizes.gets)), seconds: sizes.seconds)
            }
            rows += cell("get", payload, stores, gets)

            // Overwrites of present keys, then whatever the system does to make them durable.
            let sets = try rounds("set", payload, stores) { store, round in
                let order = shuffledIndices(count: sizes.entries, seed: UInt64(200 + round)).prefix(sizes.sets)
                return try DiskWorkloads.sets(
                    store.system, keys: keys, order: Array(order), pool: pool, shift: round + 1)
            }
            rows += cell("set", payload, stores, sets)

            // Cold gets: the store closed, its files dropped from the page cache, reopened.
            let reopening = stores.filter(\.kind.reopens)
            var resident: [String: Double] = [:]
            var droppedMetadata = false
            let cold = try rounds("get cold", payload, reopening) { store, round in
                store.system.close()
                try StoreFiles.dropFromPageCache(store.directory)
                droppedMetadata = StoreFiles.dropInodeAndDentryCaches()
                // Measured while the store is closed: opening and closing a file an open store
                // holds would drop the store's POSIX record locks (LMDB's lock.mdb, SQLite's
                // database), which a second process relies on.
                resident[store.kind.label] = max(
                    resident[store.kind.label] ?? 0, StoreFiles.residentShare(store.directory))
                store.system = try store.kind.open(store.directory, .standard)
                let order = shuffledIndices(count: sizes.entries, seed: UInt64(300 + round)).prefix(sizes.coldGets)
                return try DiskWorkloads.gets(store.system, keys: keys, order: Array(order), seconds: 60)
            }
            rows += cell("get cold", payload, reopening, cold)
            // The cold runs left the reopened stores with few pages in memory: each reads every key
            // once, untimed, so the workloads below start warm, as the warm gets did, and measure
            // the mix rather than the page faults of a first pass (YCSB's load phase ends warm too).
            // Drained as after a timed run, so the access times it queued are not written in one.
            for store in reopening {
                for key in keys.prefix(sizes.entries) { _ = try store.system.get(key) }
                try store.system.drain()
            }
            if !droppedMetadata {
                notes.append(
                    "get cold \(payload.label): /proc/sys/vm/drop_caches was not writable, so directory entries "
                        + "and inodes stayed cached: FilePerKey's path lookups were warm")
            }
            residency.append(
                "\(payload.label): "
                    + reopening.map { "\($0.kind.label) \(formatPercent(resident[$0.kind.label]))" }
                    .joined(separator: ", "))

            guard payload == mixPayload else { continue }
            let zipf = ZipfSampler(count: sizes.entries, exponent: Distribution.zipfExponent, seed: 0xC5B)
            let oneAtATime = stores.filter { $0.system.pipelineDepth == 1 }
            for (workload, setShare) in [("YCSB-A 50/50", 0.5), ("YCSB-B 95/5", 0.05)] {
                let samples = try rounds(workload, payload, oneAtATime) { store, round in
                    let plan = DiskWorkloads.mixPlan(
                        count: sizes.mixOperations, setShare: setShare, zipf: zipf, poolCount: pool.count,
                        seed: UInt64(400 + round) ^ workloadSalt(workload))
                    return try DiskWorkloads.mix(
                        store.system, keys: keys, plan: plan, pool: pool, seconds: sizes.seconds)
                }
                rows += cell(workload, payload, oneAtATime, samples)
            }

            let concurrent = stores.filter(\.kind.readsWhileWriting)
            let whileWriting = try rounds("get while writing", payload, concurrent) { store, round in
                let writer = try store.system.concurrentWriter()
                defer { if writer !== store.system { writer.close() } }
                let order = shuffledIndices(count: sizes.entries, seed: UInt64(500 + round)).prefix(sizes.gets)
                return try DiskWorkloads.getsWhileWriting(
                    store.system, writer: writer, keys: keys, entries: sizes.entries, order: Array(order), pool: pool,
                    seconds: sizes.seconds, seed: UInt64(600 + round))
            }
            rows += cell("get while writing", payload, concurrent, whileWriting)

            let shared = stores.filter(\.kind.sharesAcrossProcesses)
            let twoProcesses = try rounds("two processes", payload, shared) { store, round in
                try timeTwoProcesses(
                    kind: store.kind, system: store.system, directory: store.directory, keys: keys,
                    entries: sizes.entries, payload: payload, operations: sizes.mixOperations,
                    seed: UInt64(700 + round))
            }
            rows += cell("two processes YCSB-B", payload, shared, twoProcesses)
        }

        // Synchronous writes: each set returns once it is on stable storage.
        let payload = Payload.json100
        let pool = payload.pool(count: 256, seed: 9)
        var synchronous: [Store] = []
        for kind in kinds where kind.synchronous {
            let directory = try newDirectory("\(kind.label)-sync")
            synchronous.append(Store(kind: kind, system: try kind.open(directory, .synchronous), directory: directory))
        }
        defer { for store in synchronous { store.system.close() } }
        let synchronousSamples = try rounds("set synchronous", payload, synchronous) { store, round in
            let first = sizes.entries + round * sizes.synchronousSets
            return try DiskWorkloads.sets(
                store.system, keys: keys, order: Array(first..<first + sizes.synchronousSets), pool: pool, shift: 0)
        }
        rows += cell("set synchronous", payload, synchronous, synchronousSamples)

        // Synchronous writers together: each thread inserts its own keys through its own handle
        // (SQLite: its own connection; LMDBCache and RocksDB: the store, shared).
        let manyWriters = synchronous.filter(\.kind.writesFromManyThreads)
        for (step, writers) in Self.synchronousWriters.enumerated() {
            let samples = try rounds("set synchronous", payload, manyWriters) { store, round in
                let first =
                    sizes.entries + sizes.synchronousSets * repeats
                    + (step * repeats + round) * sizes.concurrentSynchronousSets
                let handles = try (0..<writers).map { _ in try store.system.concurrentWriter() }
                defer { for handle in handles where handle !== store.system { handle.close() } }
                let orders = (0..<writers).map { writer in
                    Array(stride(from: first + writer, to: first + sizes.concurrentSynchronousSets, by: writers))
                }
                return try DiskWorkloads.concurrentSets(handles, keys: keys, orders: orders, pool: pool)
            }
            rows += cell("set synchronous", payload, manyWriters, samples, threads: writers)
        }

        var warnings: [String] = []
        for row in rows where (row.misses ?? 0) > 0 {
            warnings.append(
                "\(row.label) missed \(row.misses ?? 0) gets of present keys (\(row.workload), \(formatValue(row)))")
        }
        for warning in warnings { log("disk: WARNING: " + warning) }

        let writerCPU = rows.filter { $0.writerCPUNanosecondsPerOperation != nil }.map { row in
            "\(row.label) \(row.workload) \(formatValue(row))\(row.threads == 1 ? "" : ", \(row.threads) threads"): "
                + formatNanoseconds(row.writerCPUNanosecondsPerOperation ?? 0)
        }
        let accessUpdates = rows.filter { $0.accessUpdatesPerOperation != nil && $0.workload.hasPrefix("get") }.map {
            row in
            "\(row.label) \(row.workload) \(formatValue(row)): \(format(row.accessUpdatesPerOperation ?? 0, decimals: 4))"
        }
        let bytesWritten = rows.filter { $0.bytesWrittenPerOperation != nil && !$0.workload.hasPrefix("get") }
            .map { row in
                "\(row.label) \(row.workload) \(formatValue(row))\(row.threads == 1 ? "" : ", \(row.threads) threads"): "
                    + formatBytes(Int((row.bytesWrittenPerOperation ?? 0).rounded())) + " ("
                    + format((row.bytesWrittenPerOperation ?? 0) / 4_096, decimals: 1) + " pages)"
            }
        let concurrentWrites = rows.filter { $0.concurrentWritesPerSecond != nil }.map { row in
            "\(row.label) \(formatRate(row.concurrentWritesPerSecond ?? 0))"
        }
        let storageRows = kinds.filter { storage[$0.label] != nil }.map { kind in
            [kind.label, compressions[kind.label] ?? "", durabilities[kind.label] ?? ""]
                + payloads.map { payload in
                    guard let bytes = storage[kind.label]?[payload] else { return "" }
                    let raw = Double(sizes.entries * (21 + payload.size))
                    return "\(formatBytes(bytes)) (\(format(Double(bytes) / raw, decimals: 2))x)"
                }
        }
        return SuiteReport(
            suite: name,
            parameters: [
                ("entries", "\(sizes.entries) per store, filled before timing; keys like item:9f3c0a51d2e4b786 (21 B)"),
                (
                    "values",
                    "100 B and 4 KB of JSON-like text (LMDBCache compresses the 4 KB ones about 3x), "
                        + "4 KB of random bytes (incompressible)"
                ),
                (
                    "get",
                    "up to \(sizes.gets) gets of present keys in random order per run, stopping after "
                        + "\(format(sizes.seconds, decimals: 1)) s"
                ),
                ("set", "\(sizes.sets) overwrites of present keys per run, then each system's flush or commit"),
                (
                    "get cold",
                    "\(sizes.coldGets) gets of distinct keys after the store is closed, its files are fdatasync'd "
                        + "and dropped from the page cache (posix_fadvise POSIX_FADV_DONTNEED), the kernel's cached "
                        + "directory entries and inodes dropped (drop_caches=2), and it is reopened"
                ),
                (
                    "YCSB-A 50/50, YCSB-B 95/5",
                    "\(mixPayload.label): up to \(sizes.mixOperations) operations per run, keys Zipf(0.99) over the "
                        + "entries, 50% or 5% overwrites, the rest gets, then each system's flush or commit"
                ),
                (
                    "two processes YCSB-B",
                    "\(mixPayload.label): YCSB-B in this process and in a second process on the same store, at once"
                ),
                (
                    "get while writing",
                    "\(mixPayload.label): gets as above while a second thread writes without pause: batches of 100 "
                        + "overwrites, each batch followed by the system's flush or commit"
                ),
                ("set synchronous", "\(sizes.synchronousSets) inserts of 100 B per run, each durable on return"),
                (
                    "set synchronous, 8 and 32 threads",
                    "\(sizes.concurrentSynchronousSets) inserts of 100 B per run over that many threads at once, "
                        + "each its own keys through its own handle, each durable on return"
                ),
                (
                    "repeats",
                    "\(repeats) rounds; each runs every system once, in an order drawn from the seed, and drains it "
                        + "(untimed) after its run"
                ),
                ("directory", "\(options.scratchDirectory) (\(fileSystemName(options.scratchDirectory)))"),
            ],
            notes: [
                "ops/s: one thread (set synchronous at 8 and 32 threads: all threads' inserts over the first "
                    + "one's start to the last one's end); set, mix and synchronous throughput includes the final "
                    + "flush or commit.",
                "set synchronous with many threads: LMDBCache's synchronous writers share commits (the writer's "
                    + "batch takes every waiting write and one durable commit syncs them all); RocksDB groups its "
                    + "WAL writes and syncs; SQLite's connections take its write lock one commit at a time "
                    + "(its busy handler sleeps while another holds it); LMDB-C has one write transaction per "
                    + "handle and is left out.",
                "durable: when a write is on stable storage: on return; per batch (each commit syncs its "
                    + "data pages, which makes the batch before it durable; the last batch is durable at the next "
                    + "commit or flush, and every run ends with one); at the end (only the run's final flush "
                    + "syncs); never (no sync, or no persistence).",
                "Access times: SQLite's UPDATE and FilePerKey's utimensat are timed inside each get; LMDBCache "
                    + "buffers them and its writer thread commits them on the other core, the rest in the untimed "
                    + "drain (its CPU time is below).",
                "Run length: get, mix and read-while-writing runs stop after the time limit, so a fast system's "
                    + "run is shorter than a slow one's; the per-round pairing cancels less of a disturbance that "
                    + "hits only part of a round.",
                "within noise: with 5 rounds, two equal systems land on one side of 1 in every round by chance "
                    + "about 6% of the time (2/32), so a few of the rows not marked may still be noise; the "
                    + "three-run comparison in the issue's note checks this.",
                "p50/p99: each operation timed on its own (a pipelined Redis batch: its time / 100); mixes: gets "
                    + "only. LMDBCache's default set returns once queued; its writer thread commits in batches.",
                "vs LMDBCache: median of the per-round ratios to LMDBCache (batched, the default; in set "
                    + "synchronous, .synchronous) with their min-max; within noise when they fall on both sides of 1.",
                "LMDBCache: DiskCache, default configuration (batched: a commit per batch with fdatasync, DEFLATE 1 "
                    + "through libdeflate for values of 512 B and up, deflated by its writer thread when the queue has "
                    + "room, so a set returns before deflate); periodic: .periodic(syncInterval: 60 s), commits without sync, "
                    + "synced by the final flush and once per 32 MiB of pages freed (which bounds its file); "
                    + "synchronous: .synchronous; tiered: Cache<String, [UInt8]> "
                    + "(BytesCodec) with a memory tier of decoded values bounded at RocksDB's block cache size "
                    + "(costLimit 256 MiB of value bytes) in front of the same disk tier, as a service links it.",
                "SQLite: system libsqlite3 as YYKVStorage: manifest table with the value inline, WAL, "
                    + "synchronous=NORMAL; a write run ends with wal_checkpoint(PASSIVE) and fdatasync of the WAL and the database; "
                    + "synchronous: synchronous=FULL; prepared statements; access time updated on read.",
                "FilePerKey: a file per key in one directory as PINDiskCache: write to a temporary file and "
                    + "rename; read, then update the file's modification time (the access date); never synced; "
                    + "synchronous: fsync of the file before the rename and of the directory after it.",
                "LMDB-C: raw LMDB C calls, no record, checksum, index or access time; 1,000 puts a transaction; "
                    + "nosync: MDB_NOSYNC, one sync at the end; per batch: MDB_NOMETASYNC, each commit "
                    + "fdatasyncs, and a sync at the end (LMDBCache's mode); + zlib: values of 512 B and up "
                    + "deflated at level 1 when smaller (LMDBCache's setting); synchronous: one put a transaction, "
                    + "full sync; MDB_NORDAHEAD in all, as LMDBCache. In the mixes its transaction of up to 1,000 "
                    + "puts spans most of a run, so it commits (and syncs) a few times where LMDBCache's writer "
                    + "commits many small batches, and its gets read that open transaction.",
                "Redis: redis-server with persistence off, one connection speaking RESP, over loopback TCP or a "
                    + "Unix socket, one request at a time or pipelined (100 commands, then 100 replies). Not in the "
                    + "synchronous, cold, read-while-writing or two-process workloads: it keeps nothing on disk.",
                "RocksDB: librocksdb through its C API, 256 MiB LRU block cache, bloom filter, Snappy (its "
                    + "default), WAL on without sync and synced at the end of a write run (synchronous: sync on "
                    + "every write). Its block cache holds blocks uncompressed, so warm gets do not decompress "
                    + "(LMDBCache inflates on every get of a compressed value). Its memtable (64 MiB) holds a 100 B "
                    + "store whole; closing flushes it, so a cold reopen reads table files (opening loads their "
                    + "index and filter blocks, untimed). Its bytes on disk include the WAL of writes not yet "
                    + "flushed to a table. Not in the two-process workload: RocksDB locks its directory to one "
                    + "process.",
                "SQLite in get while writing: the reader's access-time UPDATE waits for the writer connection's "
                    + "lock (SQLite's busy handler sleeps 1-10 ms at a time); an update still locked out after the "
                    + "timeout is skipped, as YYKVStorage skips a failed one.",
                "FilePerKey is drained with sync() (machine-wide) after each run, and SQLite with a passive "
                    + "checkpoint and sync, so neither's writeback lands in the next system's run.",
                "two processes YCSB-B: this process and a second cache-bench process each run YCSB-B "
                    + "(\(sizes.mixOperations) operations, their own Zipf draws over the same hot keys) on the "
                    + "same store at once; ops/s: both processes' operations over the first start to the last end. "
                    + "LMDB has one writer at a time across processes: LMDB-C keeps its write transaction open "
                    + "for up to 1,000 puts, so the other process's puts wait for it.",
                "get cold: share of the store's file pages still in the page cache after the drop, before the "
                    + "reopen (mincore; the highest of the rounds; reopening then reads a few: LMDB's meta pages, "
                    + "SQLite's header, RocksDB's WAL): " + residency.joined(separator: "; "),
                "get while writing: writes per second the writer thread finished meanwhile: "
                    + concurrentWrites.joined(separator: ", "),
                "LMDBCache's writer thread: CPU time per operation over the run and the drain after it "
                    + "(/proc/self/task/*/schedstat): " + writerCPU.joined(separator: "; "),
                "bytes written per operation: what the process caused to be written to storage over the run "
                    + "and the drain after it, divided by its operations (/proc/self/io write_bytes: a file page "
                    + "counts when a write dirties it, again after each sync; LMDB writes whole 4 KiB pages, "
                    + "RocksDB's WAL appends and its flushes and compactions run in this process): "
                    + bytesWritten.joined(separator: "; "),
                "LMDBCache's writes per read: access updates its disk tier committed per get over the run and "
                    + "the drain after it (lmdbcache_disk_access_updates_total; each moves one entry in the access "
                    + "order, two small LMDB writes): " + accessUpdates.joined(separator: "; "),
            ] + notes + warnings.map { "WARNING: " + $0 },
            rows: rows,
            extraTables: [
                ExtraTable(
                    title:
                        "storage: bytes on disk after the fill of \(sizes.entries) entries (x: over the raw keys and values)",
                    header: ["system", "compression", "durable"] + payloads.map(\.label),
                    rightAligned: Set(3..<(3 + payloads.count)), rows: storageRows)
            ])
    }
}
