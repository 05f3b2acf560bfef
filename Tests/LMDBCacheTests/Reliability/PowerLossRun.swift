import CacheTestSupport
import Foundation

/// One power-loss run: a real writer under the recorder, then crash states built from its log,
/// each opened by the library in a child process and checked with `cache-dump verify`.
struct PowerLossRun {
    /// What the states of one run came to.
    struct Tally: CustomStringConvertible {
        var held = 0
        var setAside = 0
        /// Set aside, the power having failed before the new store's first sync completed (LMDB
        /// had written its meta pages, unsynced): nothing was confirmed, nothing lost.
        var setAsideBeforeFirstSync = 0
        var silentlyMissing = 0
        var wrongValue = 0
        var openError = 0
        var crash = 0
        var verifyClean = 0
        var verifyDamaged = 0
        var verifyCrash = 0
        /// The first few unexpected outcomes, for the failure message.
        var examples: [String] = []
        var tornWrites = 0
        var keptWrites = 0

        var total: Int { held + setAside + setAsideBeforeFirstSync + silentlyMissing + wrongValue + openError + crash }

        var description: String {
            "\(total) states: held \(held), set aside \(setAside) (+ \(setAsideBeforeFirstSync) before the store's first "
                + "sync), silently missing \(silentlyMissing), "
                + "wrong value \(wrongValue), open error \(openError), crash \(crash); cache-dump verify: "
                + "clean \(verifyClean), damaged \(verifyDamaged), crash \(verifyCrash); "
                + "unsynced writes kept \(keptWrites) (torn \(tornWrites))"
        }
    }

    /// States in CI across the three modes (`LMDBCACHE_POWERLOSS_STATES`, default 150).
    static var totalStates: Int { SoakSettings.value("LMDBCACHE_POWERLOSS_STATES", default: 150) }
    /// The crash states' seed (`LMDBCACHE_POWERLOSS_SEED`); the log itself depends on timing.
    static var seed: UInt64 { UInt64(SoakSettings.value("LMDBCACHE_POWERLOSS_SEED", default: 12_013)) }
    /// States one checking process opens before the next one starts.
    private static let statesPerChecker = 50

    let mode: String
    let states: Int

    /// Writes, records, builds `states` crash states and checks them.
    func run() throws -> Tally {
        let root = TemporaryDirectory("power-loss-\(mode)")
        defer { root.remove() }
        let store = root.url.appendingPathComponent("store")
        try FileManager.default.createDirectory(
            at: store, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // The recorder compares /proc/self/fd links, which name canonical paths.
        let storePath = store.resolvingSymlinksInPath().path
        let recorder = try PowerLossRecorderBuild.build(into: root.url.appendingPathComponent("recorder"))
        let logPath = root.path + "/power-loss.log"
        let writer = try Self.start(
            ["powerloss-write", storePath, mode],
            environment: [
                "LD_PRELOAD": recorder, "POWERLOSS_DIRECTORY": storePath,
                "POWERLOSS_FILES": PowerLossWorkload.recordedFiles.joined(separator: ":"), "POWERLOSS_LOG": logPath,
                "LMDBCACHE_TEST_BOOT_ID": "before-power-loss",
                // Under AddressSanitizer its runtime must otherwise come first in the preload list.
                "ASAN_OPTIONS": (ProcessInfo.processInfo.environment["ASAN_OPTIONS"].map { $0 + ":" } ?? "")
                    + "verify_asan_link_order=0",
            ])
        writer.waitUntilExit()
        guard writer.terminationReason == .exit, writer.terminationStatus == 0 else {
            throw PowerLossRecorderBuild.Failure(description: "the \(mode) writer failed (\(writer.terminationStatus))")
        }
        let log = try PowerLossLog(contentsOf: logPath)
        var generator = PowerLossRandom(seed: Self.seed &+ UInt64(mode.utf8.reduce(0) { $0 &* 31 &+ Int($1) }))
        // Crash states live in memory where there is a tmpfs: they are opened once and thrown away,
        // and their checks' fsyncs prove nothing, so they need not cost a disk's.
        let statesRoot = Self.memoryBackedDirectory(mode) ?? root.url
        defer { try? FileManager.default.removeItem(at: statesRoot) }
        var tally = Tally()
        var next = 0
        while next < states {
            let batch = (next..<min(states, next + Self.statesPerChecker)).map {
                statesRoot.path + "/state-\($0)"
            }
            var beforeFirstSync: Set<String> = []
            for path in batch {
                let state = log.crashState(using: &generator)
                if state.beforeFirstSync { beforeFirstSync.insert(path) }
                tally.keptWrites += state.keptWrites
                tally.tornWrites += state.tornWrites
                try write(state, to: path)
            }
            try check(batch, beforeFirstSync: beforeFirstSync, into: &tally)
            for path in batch {
                verify(path, into: &tally)
                try? FileManager.default.removeItem(atPath: path)
            }
            next += batch.count
        }
        return tally
    }

    private func write(_ state: PowerLossLog.CrashState, to path: String) throws {
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for (index, contents) in state.files.enumerated() {
            guard let contents, index < PowerLossWorkload.recordedFiles.count else { continue }
            let file = path + "/" + PowerLossWorkload.recordedFiles[index]
            guard
                FileManager.default.createFile(
                    atPath: file, contents: Data(contents), attributes: [.posixPermissions: 0o600])
            else { throw PowerLossRecorderBuild.Failure(description: "cannot write \(file)") }
        }
        try "\(state.confirmedMarker ?? 0)".write(toFile: path + "/confirmed", atomically: false, encoding: .utf8)
    }

    /// Opens the states in checking processes; a state whose process dies of a signal is a crash,
    /// and checking goes on with the next state in a new process.
    private func check(_ paths: [String], beforeFirstSync: Set<String>, into tally: inout Tally) throws {
        var remaining = paths[...]
        while !remaining.isEmpty {
            let output = Pipe()
            let checker = try Self.start(
                ["powerloss-check", mode] + remaining,
                environment: ["LMDBCACHE_TEST_BOOT_ID": "after-power-loss", "LMDBCACHE_TEST_SAME_FILE": "1"],
                output: output)
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            checker.waitUntilExit()
            var reported = 0
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ")
                guard words.count >= 3, words[0] == "state" else { continue }
                reported += 1
                switch words[2] {
                case "held": tally.held += 1
                case "setaside" where beforeFirstSync.contains(String(words[1])): tally.setAsideBeforeFirstSync += 1
                case "setaside": tally.setAside += 1
                case "missing": tally.silentlyMissing += 1
                case "wrong": tally.wrongValue += 1
                default: tally.openError += 1
                }
                if words[2] != "held" && !beforeFirstSync.contains(String(words[1])) && tally.examples.count < 5 {
                    tally.examples.append(String(line))
                }
            }
            remaining = remaining.dropFirst(reported)
            if checker.terminationReason == .uncaughtSignal, let crashed = remaining.first {
                tally.crash += 1
                if tally.examples.count < 5 {
                    tally.examples.append("state \(crashed) crash: signal \(checker.terminationStatus)")
                }
                remaining = remaining.dropFirst()
            } else if !remaining.isEmpty {
                throw PowerLossRecorderBuild.Failure(
                    description: "the checker stopped early: \(checker.terminationStatus)")
            }
        }
    }

    /// `cache-dump verify` on what the library left of the state.
    private func verify(_ path: String, into tally: inout Tally) {
        guard let verifier = try? Self.start(["verify", "--quiet", path], executable: "cache-dump", output: Pipe())
        else { return }
        verifier.waitUntilExit()
        if verifier.terminationReason == .uncaughtSignal {
            tally.verifyCrash += 1
        } else if verifier.terminationStatus == 0 {
            tally.verifyClean += 1
        } else {
            tally.verifyDamaged += 1
            if tally.examples.count < 5 {
                tally.examples.append("state \(path): verify exit \(verifier.terminationStatus)")
            }
        }
    }

    /// A fresh directory on /dev/shm, when it is a writable tmpfs.
    private static func memoryBackedDirectory(_ mode: String) -> URL? {
        guard access("/dev/shm", W_OK) == 0 else { return nil }
        return URL(fileURLWithPath: "/dev/shm/lmdbcache-tests-power-loss-\(mode)-\(UUID().uuidString)")
    }

    /// Starts a package executable with extra environment variables; stdout to `output` (else
    /// discarded), stderr discarded.
    static func start(
        _ arguments: [String], executable: String = "cache-test-helper", environment: [String: String] = [:],
        output: Pipe? = nil
    ) throws -> Process {
        let process = Process()
        process.executableURL = HelperProcess.executable(executable)
        process.arguments = arguments
        process.environment = HelperProcess.withoutBacktracer(
            ProcessInfo.processInfo.environment.merging(environment) { $1 })
        process.standardOutput = output ?? FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }
}
