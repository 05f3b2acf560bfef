// disk-bench: exercises DiskCache at scale beside raw LMDB + zlib C calls in the same process,
// and prints what it did and how fast. See `usage` below, or run with --help.
import Foundation

let usage = """
    usage: disk-bench [--quick] [--json PATH] [--dir PATH] [--only GROUPS]

    Measures DiskCache reads and writes (4 KB JSON-like and random values, 100 B values), a
    synchronous-durability write, and a scale run, each beside raw LMDB + zlib C calls doing the
    same work. Prints an aligned table; ratio = DiskCache ops/s ÷ baseline ops/s.

      --quick        10k keys instead of 100k, 50k scale keys instead of 1M, fewer rounds
      --json PATH    also write the results as JSON to PATH
      --dir PATH     create the temporary stores under PATH (default: the system temp directory)
      --only GROUPS  run only these, comma-separated: read, write, sync, scale, trim (default: all)
    """

let legend = """
    1st pass: reads at least 1 s after the fill, so each DiskCache read also records its access time
      (default accessTimeGranularity 1 s); later rounds record only where the last one is 1 s old.
    DiskCache, granularity 1 h: the same rounds through a second handle with accessTimeGranularity 1 h.
    raw LMDB+zlib (C): MDB_NOTLS|MDB_NOSYNC, one read txn reused (mdb_txn_reset/renew), mdb_get, raw
      inflate into a new [UInt8]; every value stored raw-deflated (level 1), random ones included.
    raw LMDB (C): the same keys and values, uncompressed; writes 1000 puts a txn, MDB_NOSYNC, one
      mdb_env_sync at the end; "1 put/commit": one put a txn, full sync on every commit.
    DiskCache writes use the default configuration (batched: MDB_NOMETASYNC, an fdatasync per
      commit) and are timed through flush(); "periodic sync 1 s": durability .periodic (MDB_NOSYNC,
      a sync at most every second and on flush), the same mode as the raw baseline.
    """

/// Parses the command line; exits on `--help` or a bad argument.
func parseOptions(_ arguments: [String]) -> BenchOptions {
    var options = BenchOptions()
    var rest = arguments[...]
    func value(after flag: String) -> String {
        guard let next = rest.popFirst() else { fail("\(flag) needs a value\n\n\(usage)") }
        return next
    }
    while let argument = rest.popFirst() {
        switch argument {
        case "--quick": options.quick = true
        case "--json": options.jsonPath = value(after: argument)
        case "--dir": options.parentDirectory = value(after: argument)
        case "--only":
            let names = value(after: argument).split(separator: ",").map(String.init)
            options.groups = Set(
                names.map { name in
                    guard let group = BenchGroup(rawValue: name) else { fail("unknown group \(name)\n\n\(usage)") }
                    return group
                })
        case "-h", "--help":
            print(usage)
            exit(0)
        default: fail("unknown argument \(argument)\n\n\(usage)")
        }
    }
    return options
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("disk-bench: \(message)\n".utf8))
    exit(1)
}

let options = parseOptions(Array(CommandLine.arguments.dropFirst()))
let workspace: Workspace
do {
    workspace = try Workspace(parent: options.parentDirectory)
} catch {
    fail("cannot create a directory under \(options.parentDirectory): \(error)")
}
let machine = MachineInfo.current(directory: options.parentDirectory)
print("disk-bench\(options.quick ? " --quick" : "")")
machine.lines.forEach { print($0) }
print(
    "sizes:     \(abbreviated(options.keys)) keys; medians of \(options.readRounds) read rounds and "
        + "\(options.writeRounds) write rounds; ratio = DiskCache ops/s ÷ baseline ops/s")
print("")

let suite = Suite(options: options, workspace: workspace)
let started = ContinuousClock.now
do {
    try suite.runAll()
} catch {
    workspace.removeAll()
    fail("\(error)")
}
workspace.removeAll()

let report = Report(machine: machine, quick: options.quick, results: suite.results, notes: suite.notes)
print(report.table)
print("")
print(legend)
print("")
report.notes.forEach { print($0) }
print("total time: \(String(format: "%.1f", (ContinuousClock.now - started).seconds)) s")
if let path = options.jsonPath {
    do {
        try report.writeJSON(to: path)
    } catch {
        fail("cannot write \(path): \(error)")
    }
}
