#if Hummingbird
import CacheTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import LMDBCache
import LMDBCacheHummingbird
import ServiceLifecycleTestKit
import Testing

/// The driver behind real Hummingbird routes, driven by HummingbirdTesting's router client.
@Suite("Hummingbird: LMDBPersistDriver")
struct LMDBPersistDriverTests {
    /// Routes that use `persist`: PUT /v/:key[?ttl=s] sets, POST /v/:key creates (409 when taken),
    /// GET /v/:key reads a String, GET /n/:key reads an Int (422 on a type mismatch), GET
    /// /ttl/:key the seconds left, DELETE /v/:key removes.
    static func router(_ persist: LMDBPersistDriver) -> Router<BasicRequestContext> {
        let router = Router()
        router.put("/v/:key") { request, context -> HTTPResponse.Status in
            let key = try context.parameters.require("key")
            let body = String(buffer: try await request.body.collect(upTo: 1 << 20))
            let ttl = request.uri.queryParameters.get("ttl", as: Int64.self).map { Duration.seconds($0) }
            try await persist.set(key: key, value: body, expires: ttl)
            return .ok
        }
        router.post("/v/:key") { request, context -> HTTPResponse.Status in
            let key = try context.parameters.require("key")
            let body = String(buffer: try await request.body.collect(upTo: 1 << 20))
            do {
                try await persist.create(key: key, value: body, expires: nil)
            } catch let error as PersistError where error == .duplicate {
                return .conflict
            }
            return .created
        }
        router.get("/v/:key") { _, context -> String? in
            try await persist.get(key: try context.parameters.require("key"), as: String.self)
        }
        router.get("/n/:key") { _, context -> HTTPResponse.Status in
            do {
                _ = try await persist.get(key: try context.parameters.require("key"), as: Int.self)
            } catch let error as PersistError where error == .invalidConversion {
                return .unprocessableContent
            }
            return .ok
        }
        router.get("/ttl/:key") { _, context -> String in
            let found = try await persist.getWithTTL(key: try context.parameters.require("key"), as: String.self)
            return found.map { $0.ttl.map { "\($0.components.seconds)" } ?? "none" } ?? "missing"
        }
        router.delete("/v/:key") { _, context -> HTTPResponse.Status in
            try await persist.remove(key: try context.parameters.require("key"))
            return .noContent
        }
        return router
    }

    static func body(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test("set, get, expiry on the cache's clock, a TTL kept by a set without one, delete")
    func routes() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let time = ManualClock()
        var configuration = DiskCache.Configuration()
        configuration.clock = time.clock
        let persist = try LMDBPersistDriver(directory: dir.url, configuration: configuration)
        let app = Application(responder: Self.router(persist).buildResponder())
        try await app.test(.router) { client in
            try await client.execute(uri: "/v/a", method: .put, body: Self.body("one")) { #expect($0.status == .ok) }
            try await client.execute(uri: "/v/a", method: .get) { #expect(String(buffer: $0.body) == "one") }
            try await client.execute(uri: "/ttl/a", method: .get) { #expect(String(buffer: $0.body) == "none") }

            try await client.execute(uri: "/v/t?ttl=60", method: .put, body: Self.body("short")) { _ in }
            try await client.execute(uri: "/ttl/t", method: .get) { #expect(String(buffer: $0.body) == "60") }
            time.advance(by: .seconds(20))
            // A set without an expiry keeps the one the key has: 40 s left, not none.
            try await client.execute(uri: "/v/t", method: .put, body: Self.body("again")) { _ in }
            try await client.execute(uri: "/ttl/t", method: .get) { #expect(String(buffer: $0.body) == "40") }
            try await client.execute(uri: "/v/t", method: .get) { #expect(String(buffer: $0.body) == "again") }
            time.advance(by: .seconds(41))
            try await client.execute(uri: "/v/t", method: .get) { #expect($0.status == .noContent) }

            try await client.execute(uri: "/v/a", method: .delete) { #expect($0.status == .noContent) }
            try await client.execute(uri: "/v/a", method: .get) { #expect($0.status == .noContent) }
        }
        try await persist.shutdown()
    }

    @Test("create refuses a key that holds a value; a value stored as another type is invalidConversion")
    func createAndTypes() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let persist = try LMDBPersistDriver(directory: dir.url)
        let app = Application(responder: Self.router(persist).buildResponder())
        try await app.test(.router) { client in
            try await client.execute(uri: "/v/c", method: .post, body: Self.body("first")) {
                #expect($0.status == .created)
            }
            try await client.execute(uri: "/v/c", method: .post, body: Self.body("second")) {
                #expect($0.status == .conflict)
            }
            try await client.execute(uri: "/v/c", method: .get) { #expect(String(buffer: $0.body) == "first") }
            try await client.execute(uri: "/n/c", method: .get) { #expect($0.status == .unprocessableContent) }
        }
        try await persist.shutdown()
    }

    @Test("as a Service: run() returns after graceful shutdown, flushed, and another process reads the values")
    func serviceAndSecondProcess() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let persist = try LMDBPersistDriver(directory: dir.url)
        try await persist.set(key: "shared", value: "from the service", expires: nil)
        try await testGracefulShutdown { trigger in
            let running = Task { try await persist.run() }
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        #expect(throws: CacheError.closed) { try persist.disk.data(forKey: "shared") }
        // Another process opens the same directory: the JSON of the string is there.
        let reader = try HelperProcess(["read", dir.path, "shared"])
        #expect(reader.readLine() == "\"from the service\"")
        #expect(reader.wait() == 0)
    }

    @Test("shutdown twice, or after run() ended with graceful shutdown, does nothing more")
    func repeatedShutdown() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let persist = try LMDBPersistDriver(directory: dir.url)
        try await persist.set(key: "a", value: "b", expires: nil)
        try await testGracefulShutdown { trigger in
            let running = Task { try await persist.run() }
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        try await persist.shutdown()
        try await persist.shutdown()
    }

    @Test("two drivers on one directory: of four concurrent creates of a key, one succeeds")
    func createIsExclusiveAcrossDrivers() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let drivers = [try LMDBPersistDriver(directory: dir.url), try LMDBPersistDriver(directory: dir.url)]
        var keysCreatedTwice = 0
        for round in 0..<1_000 {
            let key = "k\(round)"
            let created = try await withThrowingTaskGroup(of: Bool.self) { group in
                for attempt in 0..<4 {
                    group.addTask {
                        do {
                            try await drivers[attempt % 2].create(key: key, value: attempt, expires: nil)
                            return true
                        } catch let error as PersistError where error == .duplicate {
                            return false
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(created >= 1)
            if created > 1 { keysCreatedTwice += 1 }
        }
        #expect(keysCreatedTwice == 0)
        for driver in drivers { try await driver.shutdown() }
    }

    @Test("a set without expiry racing a remove never leaves the new value with the removed one's expiry")
    func setWithoutExpiryRacingRemove() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let persist = try LMDBPersistDriver(directory: dir.url)
        var inherited = 0
        for round in 0..<2_000 {
            let key = "r\(round)"
            try await persist.set(key: key, value: "old", expires: .seconds(3_600))
            async let set: Void = persist.set(key: key, value: "new", expires: nil)
            async let remove: Void = persist.remove(key: key)
            _ = try await (set, remove)
            // Either order is fine: removed (nil), or "new" set after the removal (no expiry).
            if let (_, ttl) = try await persist.getWithTTL(key: key, as: String.self), ttl != nil { inherited += 1 }
        }
        #expect(inherited == 0)
        try await persist.shutdown()
    }

    @Test("the empty key holds nothing: get is nil, remove does nothing, set throws invalidKey")
    func emptyKey() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let persist = try LMDBPersistDriver(directory: dir.url)
        #expect(try await persist.get(key: "", as: Int.self) == nil)
        #expect(try await persist.getWithTTL(key: "", as: Int.self) == nil)
        try await persist.remove(key: "")
        await #expect {
            try await persist.set(key: "", value: 1, expires: nil)
        } throws: { error in
            if case CacheError.invalidKey = error { return true }
            return false
        }
        try await persist.shutdown()
    }
}
#endif
