import Foundation
import Testing

@testable import LMDBCache

@Suite("Reliability: a writer killed with SIGKILL", .serialized)
struct CrashTests {
    /// A real writer process (`cache-test-helper churn`: mixed sizes, compressed and not,
    /// overwrites and removes) is killed with SIGKILL at a random moment, `LMDBCACHE_CRASH_KILLS`
    /// times (CI 20; the soak 500) on one directory. After every kill the store opens, passes the
    /// full check, and holds every write the writer's `flush()` confirmed before the kill.
    @Test("after every SIGKILL the store opens, verifies clean and holds every write flush() confirmed")
    func killedWriterLosesNothingConfirmed() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let kills = SoakSettings.crashKills
        var random = SystemRandomNumberGenerator()
        for round in 0..<kills {
            let durability = round % 2 == 0 ? "batched" : "periodic"
            let helper = try HelperProcess(["churn", dir.path, durability])
            var flushed = 0
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                guard let line = helper.readLine(), line.hasPrefix("flushed ") else { break }
                flushed = Int(line.dropFirst("flushed ".count)) ?? flushed
            }
            // The kill lands somewhere in the batches after the last confirmed flush: this picks
            // the moment at random; nothing waits on it for synchronisation.
            usleep(UInt32.random(in: 0..<20_000, using: &random))
            helper.kill()
            try #require(flushed > 0, "round \(round): the writer confirmed no flush before it was killed")

            let problems = try StoreCheck.problems(at: dir.url)
            let setAside = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter {
                $0.contains("damaged")
            }
            try #require(
                setAside.isEmpty, "round \(round) (\(durability)): the store was set aside as damaged: \(setAside)")
            #expect(problems.isEmpty, "round \(round) (\(durability)): \(problems.prefix(5))")
            try expectConfirmedWrites(in: dir.url, flushedSteps: flushed, round: round)
        }
    }

    /// Every key whose last step is within the confirmed `flushedSteps` holds its final value.
    private func expectConfirmedWrites(in directory: URL, flushedSteps: Int, round: Int) throws {
        let disk = try DiskCache(directory: directory)
        defer { disk.close() }
        for index in 0..<max(0, flushedSteps - 2) {
            let stored = try disk.data(forKey: ChurnSequence.key(index))
            if stored != ChurnSequence.expectedValue(forKeyIndex: index) {
                let found = stored.map { "\($0.count) other bytes" } ?? "nothing"
                Issue.record(
                    """
                    round \(round): key \(ChurnSequence.key(index)) reads \(found), not what the \(flushedSteps) \
                    confirmed steps wrote; in the file: \(try Self.describeRecord(ChurnSequence.key(index), in: disk))
                    """)
                return
            }
        }
    }

    /// What the data file holds under `key`, for a failure message.
    private static func describeRecord(_ key: String, in disk: DiskCache) throws -> String {
        let storedKey = Array(key.utf8)
        return try disk.store.env.read { txn in
            guard let bytes = try txn.get(disk.store.db.records, storedKey) else { return "no record" }
            guard let header = Record.Header(bytes) else { return "a record of \(bytes.count) bytes, malformed header" }
            let checksum = (try? Record.validate(bytes)) != nil ? "valid" : "bad"
            let tag = header.keyTag == Record.keyTag(storedKey) ? "this key's" : "another key's"
            return "a record of \(bytes.count) bytes, checksum \(checksum), \(tag) tag, created \(header.created), "
                + "expires \(header.expires), value length \(header.valueLength)"
        }
    }
}
