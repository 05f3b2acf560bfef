import Foundation

// cache-bench: LMDBCache beside its peers on the same workload, in the same process and run.
//
//   swift run -c release --package-path Benchmarks cache-bench [--suite memory|all] [--quick] [--json PATH]

/// Every suite, in the order `all` runs them (disk, tiered and hitrate come later).
let allSuites: [any Suite] = [MemorySuite()]

let usage = """
    usage: cache-bench [--suite NAME] [--quick] [--json PATH]

      --suite NAME   which suite to run: \(allSuites.map(\.name).joined(separator: ", ")), or all (default: memory)
      --quick        smaller data sets and 3 repeats instead of 5: a whole run well under a minute
      --json PATH    also write the results, with the machine description, as JSON to PATH
      -h, --help     show this help
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("cache-bench: \(message)\n\n\(usage)\n".utf8))
    exit(2)
}

var options = Options()
var suiteName = "memory"
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--suite":
        guard let value = arguments.popFirst() else { fail("--suite needs a name") }
        suiteName = value
    case "--quick":
        options.quick = true
    case "--json":
        guard let value = arguments.popFirst() else { fail("--json needs a path") }
        options.jsonPath = value
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        fail("unknown argument \(argument)")
    }
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

let machine = Machine.current()
print("cache-bench\(options.quick ? " --quick" : ""): \(machine.description)")
let started = Date()

func log(_ line: String) {
    FileHandle.standardError.write(
        Data("[\(String(format: "%6.1f", Date().timeIntervalSince(started))) s] \(line)\n".utf8))
}

var reports: [SuiteReport] = []
for suite in suites {
    let report = suite.run(options: options, log: log)
    reports.append(report)
    print("")
    print(report.render())
}
print("")
print("machine: \(machine.description)")
print("total time: \(format(Date().timeIntervalSince(started), decimals: 1)) s")

if let path = options.jsonPath {
    let report = RunReport(
        date: ISO8601DateFormatter().string(from: started), quick: options.quick, machine: machine, suites: reports)
    do {
        try writeJSON(report, to: path)
        print("results written to \(path)")
    } catch {
        fail("could not write \(path): \(error)")
    }
}
