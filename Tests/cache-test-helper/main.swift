// A second real process for LMDBCache's tests.
//
//   cache-test-helper write DIR PREFIX COUNT
//       sets PREFIX0 ..< PREFIX<COUNT> (values from sampleBytes), reads each back, flushes,
//       prints "done COUNT" and exits 0
//   cache-test-helper churn DIR [periodic]
//       runs ChurnSequence steps forever (in periodic durability when asked); every 50 steps flushes and prints "flushed N" (steps
//       0..<N are durable). Meant to be killed.
//   cache-test-helper hold DIR
//       opens the cache, reads its totals (so it holds a reader slot), prints "open" and waits.
//       Meant to be killed.
//   cache-test-helper hold-named DIR NAME
//       as hold, after renaming its main thread to NAME (at most 15 bytes; any bytes, escape
//       sequences too) through /proc/self/comm, which then shows it. Meant to be killed.
//   cache-test-helper hold-readonly DIR
//       opens the cache read-only (as cache-dump does), reads its totals, prints "open" and
//       waits. Meant to be killed.
//   cache-test-helper pin DIR
//       opens the cache and, inside a read transaction (verify's, which reports progress every
//       4,096 records, so the store needs that many), prints "pinned" and waits. Meant to be killed.
//   cache-test-helper closed DIR
//       opens the cache, closes it, keeps the closed handle, prints "closed" and waits.
//   cache-test-helper mixed DIR PROCESS COUNT
//       runs operations 0..<COUNT of MixedWorkload for PROCESS, flushing and printing
//       "progress N" every 250; checks every value it reads with KeyedValue (exit 2 on a wrong
//       one); prints "done COUNT" and exits 0
//   cache-test-helper check DIR COUNT
//       reads keys k0 ..< k<COUNT> (KeyedValue values), then writes and reads back a fresh key;
//       prints "hits H misses M errors E wrong W fresh ok|refused|wrong" and exits 0 (a crash is
//       a signal)
//   cache-test-helper powerloss-write DIR MODE
//       runs PowerLossWorkload in durability MODE (batched, synchronous, periodic) under the
//       power-loss recorder; after each confirmation (a returned flush, or a synchronous insert)
//       appends a marker to $POWERLOSS_LOG whose id is the number of operations confirmed. Exits
//       without closing (the log is cut at random points anyway).
//   cache-test-helper periodic-commit DIR
//       in .periodic durability (an hour's interval: no periodic sync) writes k0 and flushes,
//       writes k1 and waits until it is committed (not synced), prints "committed" and waits.
//       Meant to be killed.
//   cache-test-helper powerloss-check MODE DIR...
//       opens each crash state DIR (its confirmed operation count in DIR/confirmed), reads every
//       key and prints "state DIR OUTCOME held H missing M wrong W", OUTCOME being held,
//       setaside, missing, wrong or error (a crash is a signal the test counts)
//   cache-test-helper hold-exclusive DIR
//       takes the presence lock on DIR/processes.lock exclusively, as a compaction does, prints
//       "exclusive" and waits. Meant to be killed.
//   cache-test-helper hold-writer DIR
//       opens the store with LMDB directly and begins a write transaction (LMDB's writer lock,
//       as a `cache-dump put` stopped with Ctrl-Z holds it), prints "writing" and waits. Meant
//       to be killed.
//   cache-test-helper open-read-loop DIR KEY COUNT
//       COUNT times: opens the cache, reads KEY as UTF-8 and closes it; prints "good G poisoned P
//       missing M refused R" (values "good" and "poisoned"; refused: the open or read threw) and
//       the first refusal's error on stderr
//   cache-test-helper read DIR KEY
//       prints the value stored under KEY as UTF-8 text, or "missing"
//   cache-test-helper put DIR KEY TEXT
//       stores TEXT's UTF-8 under KEY, flushes and closes; prints "stored"
//   cache-test-helper noop-sync DIR
//       in .synchronous durability sets a and b, trims to one entry (a commit whose meta page is
//       not synced), then arms the preloaded inject-faults interposer to fail every later
//       fdatasync and removes the absent key "absent"; prints "remove ok" or "remove error ERROR"
//       and exits without closing
//   cache-test-helper faults DIR [address-space]
//       open, write, flush, read, compact, trim, close, one line per step's outcome (FaultScenario);
//       run with the inject-faults interposer preloaded, or with its address space capped
//   cache-test-helper serve DIR [POLL-MS|off]
//       opens a Cache<String, String> (change log polled every POLL-MS, default 5, or not
//       followed), prints "ready" and answers commands read from stdin, one line each
//       (ServeCommand: put, get, mem, rm, rmtag, clear, flush, follow, stats, churn, count,
//       hammer, hammer-stop, quit)
//   cache-test-helper node DIR PORT [OPTION=VALUE...]
//       (built with the Redis trait) a Cache<String, String> with the Redis tier at
//       127.0.0.1:PORT, driven like serve (NodeCommand: put, load, leaseload, get, mem, rm, rmtag,
//       flush, stats, quit)
import CLMDB
import CacheTestSupport
import Foundation
import LMDBCache

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("cache-test-helper: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail("usage: cache-test-helper write DIR PREFIX COUNT | churn DIR") }
let directory = URL(fileURLWithPath: arguments[2])

do {
    switch arguments[1] {
    case "write":
        guard arguments.count == 5, let count = Int(arguments[4]) else { fail("usage: write DIR PREFIX COUNT") }
        let prefix = arguments[3]
        let disk = try DiskCache(directory: directory)
        for index in 0..<count {
            let value = sampleBytes(count: 64 + index % 2_000, compressible: index % 2 == 0, seed: UInt64(index))
            try disk.setData(value, forKey: "\(prefix)\(index)")
            guard try disk.data(forKey: "\(prefix)\(index)") == value else { fail("read back a different value") }
        }
        try disk.flush()
        disk.close()
        FileHandle.standardOutput.write(Data("done \(count)\n".utf8))
    case "churn":
        var configuration = DiskCache.Configuration()
        if arguments.count > 3 && arguments[3] == "periodic" {
            configuration.durability = .periodic(syncInterval: .milliseconds(100))
        }
        let disk = try DiskCache(directory: directory, configuration: configuration)
        var step = 0
        while true {
            for operation in ChurnSequence.steps(step) {
                switch operation {
                case .set(let key, let value): try disk.setData(value, forKey: key)
                case .remove(let key): try disk.removeData(forKey: key)
                }
            }
            step += 1
            if step % 50 == 0 {
                try disk.flush()
                FileHandle.standardOutput.write(Data("flushed \(step)\n".utf8))
            }
        }
    case "mixed":
        guard arguments.count == 5, let process = Int(arguments[3]), let count = Int(arguments[4]) else {
            fail("usage: mixed DIR PROCESS COUNT")
        }
        var configuration = DiskCache.Configuration()
        configuration.initialMapSize = 1 << 20  // every process grows the map and adopts the others' growth
        let disk = try DiskCache(directory: directory, configuration: configuration)
        for index in 0..<count {
            switch MixedWorkload.operation(process: process, index: index) {
            case .set(let key, let seed, let expiry):
                try disk.setData(
                    KeyedValue.make(key: key, seed: seed), forKey: key, expiresAfter: expiry.map { .seconds($0) })
            case .get(let key):
                if let value = try disk.data(forKey: key), !KeyedValue.isValid(value, forKey: key) {
                    FileHandle.standardError.write(Data("cache-test-helper: wrong value for \(key)\n".utf8))
                    exit(2)
                }
            case .remove(let key): try disk.removeData(forKey: key)
            case .trimToCount(let count): try disk.trim(toCount: count)
            case .trimToCost(let cost): try disk.trim(toCost: cost)
            case .removeExpired: try disk.removeExpired()
            }
            if (index + 1) % 250 == 0 {
                try disk.flush()
                FileHandle.standardOutput.write(Data("progress \(index + 1)\n".utf8))
            }
        }
        try disk.flush()
        disk.close()
        FileHandle.standardOutput.write(Data("done \(count)\n".utf8))
    case "check":
        guard arguments.count == 4, let count = Int(arguments[3]) else { fail("usage: check DIR COUNT") }
        let disk = try DiskCache(directory: directory)
        var (hits, misses, errors, wrong) = (0, 0, 0, 0)
        for index in 0..<count {
            let key = "k\(index)"
            do {
                if let value = try disk.data(forKey: key) {
                    if KeyedValue.isValid(value, forKey: key) { hits += 1 } else { wrong += 1 }
                } else {
                    misses += 1
                }
            } catch {
                errors += 1
            }
        }
        // The store may refuse writes now (LMDB found its pages damaged): a clear error is fine.
        let fresh = KeyedValue.make(key: "fresh", seed: 99)
        var freshOutcome = "ok"
        do {
            try disk.setData(fresh, forKey: "fresh")
            try disk.flush()
            if try disk.data(forKey: "fresh") != fresh { freshOutcome = "wrong" }
        } catch let error as CacheError {
            freshOutcome = "refused"
            FileHandle.standardError.write(Data("cache-test-helper: fresh write refused: \(error)\n".utf8))
        }
        disk.close()
        let summary = "hits \(hits) misses \(misses) errors \(errors) wrong \(wrong) fresh \(freshOutcome)"
        FileHandle.standardOutput.write(Data((summary + "\n").utf8))
    case "powerloss-write":
        guard arguments.count == 4, let durability = PowerLossWorkload.durability(arguments[3]),
            let log = ProcessInfo.processInfo.environment["POWERLOSS_LOG"]
        else { fail("usage: powerloss-write DIR MODE (with POWERLOSS_LOG)") }
        var configuration = DiskCache.Configuration()
        configuration.durability = durability
        let disk = try DiskCache(directory: directory, configuration: configuration)
        for index in 0..<PowerLossWorkload.operationCount {
            try disk.setData(
                PowerLossWorkload.value(ofOperation: index), forKey: PowerLossWorkload.key(ofOperation: index))
            if durability == .synchronous {
                PowerLossLog.appendMarker(index + 1, toLogAt: log)
            } else if (index + 1) % PowerLossWorkload.operationsPerFlush == 0 {
                try disk.flush()
                PowerLossLog.appendMarker(index + 1, toLogAt: log)
            } else if index % 7 == 0 {
                // Pacing, not synchronisation: lets commits and periodic syncs fall between writes.
                usleep(2_000)
            }
        }
        FileHandle.standardOutput.write(Data("done\n".utf8))
        exit(0)
    case "periodic-commit":
        var configuration = DiskCache.Configuration()
        configuration.durability = .periodic(syncInterval: .seconds(3_600))
        let disk = try DiskCache(directory: directory, configuration: configuration)
        try disk.setData(KeyedValue.make(key: "k0", seed: 1), forKey: "k0")
        try disk.flush()
        try disk.setData(KeyedValue.make(key: "k1", seed: 2), forKey: "k1")
        // Polls the committed totals: the writer thread commits k1 on its own, without a sync.
        while disk.totalCount < 2 { usleep(1_000) }
        FileHandle.standardOutput.write(Data("committed\n".utf8))
        while true { sleep(60) }
        withExtendedLifetime(disk) {}
    case "powerloss-check":
        guard arguments.count >= 4, let durability = PowerLossWorkload.durability(arguments[2]) else {
            fail("usage: powerloss-check MODE DIR...")
        }
        let judge = PowerLossWorkload.Judge()
        for state in arguments[3...] {
            let confirmedText = (try? String(contentsOfFile: state + "/confirmed", encoding: .utf8)) ?? "0"
            let confirmed = PowerLossWorkload.versions(through: Int(confirmedText) ?? 0)
            var configuration = DiskCache.Configuration()
            configuration.durability = durability
            var line: String
            do {
                let disk = try DiskCache(directory: URL(fileURLWithPath: state), configuration: configuration)
                let setAside = try FileManager.default.contentsOfDirectory(atPath: state)
                    .contains { $0.hasPrefix("data.mdb.damaged-") }
                var counts: [PowerLossWorkload.Finding: Int] = [:]
                for index in 0..<PowerLossWorkload.keyCount {
                    let key = "p\(index)"
                    let finding = judge.judge(
                        try disk.data(forKey: key), key: key, confirmed: confirmed[key] ?? 0)
                    counts[finding, default: 0] += 1
                }
                disk.close()
                let (held, missing, wrong) = (counts[.held] ?? 0, counts[.missing] ?? 0, counts[.wrong] ?? 0)
                let outcome = wrong > 0 ? "wrong" : setAside ? "setaside" : missing > 0 ? "missing" : "held"
                line = "state \(state) \(outcome) held \(held) missing \(missing) wrong \(wrong)"
            } catch {
                line = "state \(state) error \(error)".replacingOccurrences(of: "\n", with: " ")
            }
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
    case "faults":
        FaultScenario.run(
            directory: directory, limitAddressSpace: arguments.count > 3 && arguments[3] == "address-space")
    case "hold":
        let disk = try DiskCache(directory: directory)
        _ = disk.totalCount
        FileHandle.standardOutput.write(Data("open\n".utf8))
        while true { sleep(60) }
        withExtendedLifetime(disk) {}
    case "hold-named":
        guard arguments.count == 4 else { fail("usage: hold-named DIR NAME") }
        // What prctl(PR_SET_NAME) does; /proc/self/comm is the main thread's (Swift cannot call
        // the variadic prctl, and Glibc's module leaves out pthread_setname_np).
        guard let comm = FileHandle(forWritingAtPath: "/proc/self/comm") else { fail("cannot open /proc/self/comm") }
        try comm.write(contentsOf: Data(arguments[3].utf8))
        try comm.close()
        let disk = try DiskCache(directory: directory)
        _ = disk.totalCount
        FileHandle.standardOutput.write(Data("open\n".utf8))
        while true { sleep(60) }
        withExtendedLifetime(disk) {}
    case "hold-readonly":
        var configuration = DiskCache.Configuration()
        configuration.readOnly = true
        let disk = try DiskCache(directory: directory, configuration: configuration)
        _ = disk.totalCount
        FileHandle.standardOutput.write(Data("open\n".utf8))
        while true { sleep(60) }
        withExtendedLifetime(disk) {}
    case "pin":
        let disk = try DiskCache(directory: directory)
        _ = try disk.verify { _ in
            FileHandle.standardOutput.write(Data("pinned\n".utf8))
            while true { sleep(60) }
        }
        fail("the store has fewer than 4,096 records")
    case "hold-exclusive":
        let file = open(directory.path + "/processes.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard file >= 0 else { fail("cannot open processes.lock: \(errno)") }
        var request = flock()
        request.l_type = Int16(F_WRLCK)
        request.l_whence = Int16(SEEK_SET)
        guard fcntl(file, 37 /* F_OFD_SETLK */, &request) == 0 else { fail("cannot lock: \(errno)") }
        FileHandle.standardOutput.write(Data("exclusive\n".utf8))
        while true { sleep(60) }
    case "hold-writer":
        var env: OpaquePointer?
        var txn: OpaquePointer?
        guard mdb_env_create(&env) == 0, mdb_env_set_maxdbs(env, 16) == 0,
            mdb_env_open(env, directory.path, UInt32(MDB_NOTLS), 0o600) == 0,
            mdb_txn_begin(env, nil, 0, &txn) == 0
        else { fail("cannot begin a write transaction") }
        FileHandle.standardOutput.write(Data("writing\n".utf8))
        while true { sleep(60) }
    case "open-read-loop":
        guard arguments.count == 5, let count = Int(arguments[4]) else { fail("usage: open-read-loop DIR KEY COUNT") }
        var tally = (good: 0, poisoned: 0, missing: 0, refused: 0)
        for _ in 0..<count {
            do {
                let disk = try DiskCache(directory: directory)
                defer { disk.close() }
                switch try disk.data(forKey: arguments[3]).map({ String(decoding: $0, as: UTF8.self) }) {
                case "good": tally.good += 1
                case "poisoned": tally.poisoned += 1
                default: tally.missing += 1
                }
            } catch {
                if tally.refused == 0 { FileHandle.standardError.write(Data("\(error)\n".utf8)) }
                tally.refused += 1
            }
        }
        print("good \(tally.good) poisoned \(tally.poisoned) missing \(tally.missing) refused \(tally.refused)")
    case "read":
        guard arguments.count == 4 else { fail("usage: read DIR KEY") }
        let disk = try DiskCache(directory: directory)
        print(try disk.data(forKey: arguments[3]).map { String(decoding: $0, as: UTF8.self) } ?? "missing")
        disk.close()
    case "put":
        guard arguments.count == 5 else { fail("usage: put DIR KEY TEXT") }
        let disk = try DiskCache(directory: directory)
        try disk.setData(Array(arguments[4].utf8), forKey: arguments[3])
        disk.close()
        print("stored")
    case "noop-sync":
        var configuration = DiskCache.Configuration()
        configuration.durability = .synchronous
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: directory, configuration: configuration)
        try disk.setData([1], forKey: "a")
        try disk.setData([2], forKey: "b")
        try disk.trim(toCount: 1)
        // The interposer reads these on every call; the writer is idle (nothing queued, no
        // scheduler), so no thread reads them while they change.
        setenv("LMDBCACHE_FAULT_ERROR", "\(EIO)", 1)
        setenv("LMDBCACHE_FAULT_OCCURRENCE", "1+", 1)
        setenv("LMDBCACHE_FAULT_CALL", "fdatasync", 1)
        do {
            try disk.removeData(forKey: "absent")
            print("remove ok")
        } catch {
            print("remove error \(error)")
        }
        exit(0)
    case "serve":
        ServeCommand.run(directory: directory, arguments: arguments.dropFirst(3))
    case "node":
        #if Redis
        NodeCommand.run(directory: directory, arguments: arguments.dropFirst(3))
        #else
        fail("node needs the Redis trait: swift build --traits Redis")
        #endif
    case "closed":
        let disk = try DiskCache(directory: directory)
        disk.close()
        FileHandle.standardOutput.write(Data("closed\n".utf8))
        while true { sleep(60) }
        withExtendedLifetime(disk) {}
    default:
        fail("unknown command \(arguments[1])")
    }
} catch {
    fail("\(error)")
}
