import ArgumentParser

/// `cache-dump`: inspects, verifies, exports, imports, compacts and repairs an LMDBCache
/// directory, also while services have it open.
public struct CacheDumpCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "cache-dump",
        abstract: "Inspect, verify, export, import, compact and repair an LMDBCache directory.",
        discussion: """
            Only put, rm, clear, trim, verify --repair, import, compact and readers --clear-stale \
            change the cache. Exit status: 0 done, 1 verify found problems, 2 key not found, \
            3 not a cache, 4 damaged, 5 newer format, 6 store in use, 7 bad input, \
            8 symbolic link refused, 9 other failure, 10 not confirmed, 11 output file exists, 64 usage.
            """,
        subcommands: [
            Stats.self, List.self, Get.self, Put.self, Remove.self, Clear.self, Trim.self, Verify.self,
            Export.self, Import.self, Compact.self, Readers.self,
        ])

    public init() {}
}

/// The options every subcommand shares.
struct CommonOptions: ParsableArguments {
    @Argument(help: "The cache directory.")
    var path: String

    @Flag(help: "Show no progress bar.")
    var quiet = false
}

/// The key arguments of get, put and rm.
struct KeyOptions: ParsableArguments {
    @Option(name: .customLong("key-encoding"), help: "How keys are written: utf8, hex or base64.")
    var encoding: KeyEncodingArgument = .utf8

    func bytes(_ text: String) throws -> [UInt8] {
        guard let bytes = encoding.value.bytes(text), !bytes.isEmpty else {
            throw DumpFailure(.badInput, "\"\(text)\" is not a non-empty \(encoding.value.rawValue) key")
        }
        return bytes
    }
}

struct KeyEncodingArgument: ExpressibleByArgument {
    var value: KeyEncoding
    init?(argument: String) {
        guard let value = KeyEncoding(rawValue: argument) else { return nil }
        self.value = value
    }
    static let utf8 = KeyEncodingArgument(argument: "utf8")!
    static var allValueStrings: [String] { KeyEncoding.allCases.map(\.rawValue) }
}

/// A `DURATION` argument: `90s`, `15m`, `12h`, `7d`.
struct DurationValue: ExpressibleByArgument {
    var duration: Duration
    init?(argument: String) {
        guard let duration = DurationArgument.parse(argument) else { return nil }
        self.duration = duration
    }
}

extension ParsableCommand {
    /// Runs `body`; a failure becomes one line on standard error and its exit status.
    func reporting(_ body: () throws -> ExitStatus) throws {
        let status: ExitStatus
        do {
            status = try body()
        } catch {
            let failure = DumpFailure.from(error)
            Console.error(failure.message)
            status = failure.status
        }
        if status != .success { throw ExitCode(status.rawValue) }
    }
}
