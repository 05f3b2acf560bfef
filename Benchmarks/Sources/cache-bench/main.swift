import BenchmarkData
import Foundation

// cache-bench: LMDBCache beside its peers on the same workload, in the same process and run.
//
//   swift run -c release --package-path Benchmarks cache-bench [--suite NAME] [--quick] [--json PATH] [--report DIR]

// The second process of the two-process workload: this executable run again (TwoProcesses.swift).
if CommandLine.arguments.dropFirst().first == TwoProcessChild.flag {
    TwoProcessChild.main(CommandLine.arguments.dropFirst(2))
}
// The reader process of the coherence suite (CoherenceReader.swift), with swift-metrics of its own.
if CommandLine.arguments.dropFirst().first == CoherenceReader.flag {
    CoherenceReader.main(CommandLine.arguments.dropFirst(2))
}

// A node process of the fleet suite (FleetNode.swift): a cache with the Redis tier, driven by line commands.
if CommandLine.arguments.dropFirst().first == FleetNode.flag {
    FleetNode.main(CommandLine.arguments.dropFirst(2))
}

/// Every suite, in the order `all` runs them.
let allSuites: [any Suite] = [
    MemorySuite(), DiskSuite(), TieredSuite(), HitRateSuite(), CoherenceSuite(), FleetSuite(),
]

let usage = """
    usage: cache-bench [--suite NAME] [--quick] [--json PATH] [--report DIR]
                       [--trace PATH [--trace-format arc|oracle|plain] [--sizes N,N,...]]... [--dir PATH] [--seed N]
                       [--workloads W,W,...] [--systems S,S,...]

      --suite NAME          \(allSuites.map(\.name).joined(separator: ", ")), or all (the default)
      --quick               small data sets and few repeats: a whole run under a minute (CI runs it)
      --json PATH           also write {"machine": {...}, "results": [...]} to PATH
      --report DIR          also write DIR/report.md with the tables, DIR/summary.md (the README's
                            table) and DIR/<suite>.svg charts
      --summarize JSON      run nothing: write summary.md beside JSON, a results.json of a run
      --trace PATH          hitrate: replay this trace (gzip or plain) instead of the bundled ones
                            (without --trace: every bundled trace, Benchmarks/Traces/OLTP.lis.gz
                            and cloudPhysicsIO.oracleGeneral.bin.gz, at their published sizes);
                            give it again for more traces: replayed in order, one report
      --trace-format F      applies to the --trace before it: arc (the ARC paper's .lis,
                            count-bounded), oracle (libCacheSim's oracleGeneral .bin,
                            byte-bounded) or plain (one key per line, count-bounded); default: by
                            the file name (.lis, oracleGeneral, .bin)
      --sizes N,N,...       applies to the --trace before it: capacities, entries for arc and plain,
                            bytes for oracle (K, M, G suffixes are binary: 128M is 128 MiB);
                            default: the sizes with published figures (OLTP, cloudPhysicsIO)
      --dir PATH            where the disk, tiered, coherence and fleet suites create their stores
                            (default: temp dir)
      --seed N              the seed of each round's order of systems (default: a new one, printed)
      --workloads W,W,...   disk: only these workloads ("get", "set", "get cold", "YCSB-A 50/50",
                            "YCSB-B 95/5", "get while writing", "two processes", "set synchronous"),
                            for iterating on one row; a report wants them all
      --systems S,S,...     disk: only the systems whose label starts with one of these
      -h, --help            show this help
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("cache-bench: \(message)\n\n\(usage)\n".utf8))
    exit(2)
}

var options = Options()
var suiteName = "all"
/// Each `--trace` with the `--trace-format` and `--sizes` given after it, in order.
var traceArguments: [(path: String, format: TraceFormat?, sizes: [Int]?)] = []
var arguments = CommandLine.arguments.dropFirst()
@MainActor
func value(after flag: String) -> String {
    guard let value = arguments.popFirst() else { fail("\(flag) needs a value") }
    return value
}
while let argument = arguments.popFirst() {
    switch argument {
    case "--summarize":
        let path = value(after: argument)
        do {
            let run = try JSONDecoder().decode(RunReport.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
            let target = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("summary.md")
            try Data(summaryMarkdown(run.results, machine: run.machine).utf8).write(to: target)
            print("summary written to \(target.path)")
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("cache-bench: cannot summarize \(path): \(error)\n".utf8))
            exit(1)
        }
    case "--suite": suiteName = value(after: argument)
    case "--quick": options.quick = true
    case "--json": options.jsonPath = value(after: argument)
    case "--report": options.reportDirectory = value(after: argument)
    case "--dir": options.scratchDirectory = value(after: argument)
    case "--seed":
        let text = value(after: argument)
        guard let seed = UInt64(text) else { fail("--seed needs a whole number, not \(text)") }
        options.seed = seed
    case "--trace": traceArguments.append((value(after: argument), nil, nil))
    case "--trace-format":
        let name = value(after: argument)
        guard let format = TraceFormat(rawValue: name) else { fail("unknown trace format \(name)") }
        guard let last = traceArguments.indices.last else { fail("--trace-format applies to a --trace before it") }
        guard traceArguments[last].format == nil else {
            fail("--trace-format given twice for \(traceArguments[last].path)")
        }
        traceArguments[last].format = format
    case "--sizes":
        let list = value(after: argument).split(separator: ",").map { parseSize(String($0)) }
        guard !list.isEmpty, list.allSatisfy({ ($0 ?? 0) > 0 }) else { fail("--sizes needs positive sizes") }
        guard let last = traceArguments.indices.last else { fail("--sizes applies to a --trace before it") }
        guard traceArguments[last].sizes == nil else { fail("--sizes given twice for \(traceArguments[last].path)") }
        traceArguments[last].sizes = list.map { $0! }
    case "--workloads":
        options.workloads = Set(value(after: argument).split(separator: ",").map(String.init))
    case "--systems":
        options.systems = value(after: argument).split(separator: ",").map(String.init)
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        fail("unknown argument \(argument)")
    }
}
options.traces = traceArguments.map { path, format, sizes in
    guard let format = format ?? TraceFormat(guessingFrom: path) else {
        fail("cannot tell the format of \(path): give --trace-format arc, oracle or plain after it")
    }
    return TraceRequest(path: path, format: format, sizes: sizes)
}

let suites: [any Suite]
if suiteName == "all" {
    suites = allSuites
} else if let suite = allSuites.first(where: { $0.name == suiteName }) {
    suites = [suite]
} else {
    fail("unknown suite \(suiteName)")
}

#if DEBUG
print("WARNING: a debug build; build with -c release for meaningful figures.\n")
#endif

// Before any cache opens: the disk suite reads the disk tier's access-update counter.
AccessUpdates.bootstrap()

var machine = Machine.current(quick: options.quick)
print("cache-bench\(options.quick ? " --quick" : ""): \(machine.description)")
print("seed: \(options.seed) (--seed \(options.seed) repeats this run's orders of systems)")
let started = Date()
let runStartTimes = CPUTimes.now()

func log(_ line: String) {
    FileHandle.standardError.write(
        Data("[\(String(format: "%6.1f", Date().timeIntervalSince(started))) s] \(line)\n".utf8))
}

var reports: [SuiteReport] = []
for suite in suites {
    do {
        let before = CPUTimes.now()
        var report = try suite.run(options: options, log: log)
        report.parameters.append(("CPU steal", CPUTimes.describeSteal(from: before, to: CPUTimes.now())))
        reports.append(report)
        print("")
        print(report.render())
    } catch {
        FileHandle.standardError.write(Data("cache-bench: the \(suite.name) suite failed: \(error)\n".utf8))
        exit(1)
    }
}
let seconds = Date().timeIntervalSince(started)
machine.cpuSteal = CPUTimes.describeSteal(from: runStartTimes, to: CPUTimes.now())
print("")
print("machine: \(machine.description)")
print("total time: \(format(seconds, decimals: 1)) s")

if let path = options.jsonPath {
    do {
        try writeJSON(
            RunReport(machine: machine, seed: options.seed, results: reports.flatMap { $0.rows + $0.extraRows }),
            to: path)
        print("results written to \(path)")
    } catch {
        FileHandle.standardError.write(Data("cache-bench: could not write \(path): \(error)\n".utf8))
        exit(1)
    }
}
if let directory = options.reportDirectory {
    do {
        try writeReport(reports, machine: machine, seed: options.seed, seconds: seconds, to: directory)
        print("report written to \(directory)/report.md")
    } catch {
        FileHandle.standardError.write(Data("cache-bench: could not write the report to \(directory): \(error)\n".utf8))
        exit(1)
    }
}
