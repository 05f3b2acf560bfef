import Foundation
import Testing

@testable import LMDBCache

/// Review of issue 19: `ChangeFollower.start(interval:)` converts the poll interval to
/// nanoseconds with `interval.components.seconds * 1_000_000_000`, an Int64 product that traps
/// before `Int(clamping:)` sees it: a cache opened with a poll interval past about 292 years
/// (e.g. `.seconds(Int64.max)`, a natural "practically never") crashes the process in
/// `Cache.init`. Run in a child process (an exit test), so the trap fails this test only.
@Suite("Review 19: the follower's poll interval")
struct FollowerIntervalReviewTests {
    @Test("a very long poll interval opens a cache instead of trapping")
    func hugeIntervalDoesNotTrap() async {
        await #expect(processExitsWith: .success) {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            var configuration = Cache<String, String>.Configuration()
            configuration.coherence = .init(pollInterval: .seconds(Int64.max))
            let cache = try Cache<String, String>(directory: dir.url, configuration: configuration)
            cache.insert("v", forKey: "k")
            cache.close()
        }
    }

    @Test("an interval of 300 years (past Int64 nanoseconds) opens a cache instead of trapping")
    func threeHundredYears() async {
        await #expect(processExitsWith: .success) {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            var configuration = Cache<String, String>.Configuration()
            configuration.coherence = .init(pollInterval: .seconds(300 * 365 * 86_400))
            let cache = try Cache<String, String>(directory: dir.url, configuration: configuration)
            cache.close()
        }
    }
}
