import Foundation
import Synchronization
import Testing

@testable import LMDBCache

/// Review of issue 19: `Cache.store` with invalid tags (Cache.swift, the `catch` after
/// `EntryTags(tagSet)`) checks `loads.isSuperseded(key)` and then calls `removeValue(forKey:)`
/// without holding the key's write lock in between. An insert that lands in that window
/// supersedes the load, and is then removed by it: a load's outcome undoes a newer write, which
/// `store`'s contract (and `fromLoad`'s check under the lock everywhere else) rules out.
///
/// The window is made deterministic with a key type whose `cacheKeyBytes` runs a hook once:
/// `removeValue(forKey:)` reads the key's bytes before taking the lock, after the check.
@Suite("Review 19: a load with invalid tags racing an insert", .serialized)
struct InvalidTagLoadReviewTests {
    /// A key whose `cacheKeyBytes` runs the armed hook once.
    struct HookedKey: CacheKey {
        let name: String
        static let hook = Mutex<(@Sendable () -> Void)?>(nil)

        init(_ name: String) { self.name = name }
        init?(cacheKeyBytes bytes: [UInt8]) { name = String(decoding: bytes, as: UTF8.self) }

        var cacheKeyBytes: [UInt8] {
            if let hook = Self.hook.withLock({ hook in
                defer { hook = nil }; return hook
            }) {
                hook()
            }
            return Array(name.utf8)
        }
    }

    typealias HookedCache = Cache<HookedKey, String>

    @Test("an insert after the load's supersession check is not removed by the load's failed store")
    func newerInsertSurvives() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = HookedCache.Configuration()
        configuration.coherence = .off
        let cache = try HookedCache(directory: dir.url, configuration: configuration)
        defer { cache.close() }
        let key = HookedKey("k")
        let value = try await cache.value(forKey: key, policy: .reloadIgnoringCache) { context in
            context.tags = [""]  // invalid: nothing is stored, and (since the review) nothing removed
            // Fires at the first use of the key's bytes after the loader returns: inside
            // removeValue(forKey:), after loads.isSuperseded(key) said no.
            HookedKey.hook.withLock { $0 = { cache.insert("newer", forKey: key) } }
            return "loaded"
        }
        #expect(value == "loaded")
        // The hook runs at the next use of the key's bytes: the insert lands after the load.
        cache.insert("first", forKey: HookedKey("other"))
        #expect(HookedKey.hook.withLock { $0 == nil }, "the hook ran")
        #expect(cache.value(forKey: key) == "newer", "the insert made after the load's check was removed by the load")
    }
}
