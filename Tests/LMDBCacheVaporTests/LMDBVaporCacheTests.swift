#if Vapor
import CacheTestSupport
import Foundation
import LMDBCache
import LMDBCacheVapor
import NIOConcurrencyHelpers
import NIOPosix
import XCTVapor
import AsyncHTTPClient

/// The cache behind real Vapor routes, driven by XCTVapor's `app.test` (an XCTest case:
/// XCTVapor reports through XCTest).
final class LMDBVaporCacheTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUp() {
        directory = TemporaryDirectory()
    }

    override func tearDown() {
        directory.remove()
    }

    /// An application whose cache is `.lmdb(directory:)`, with routes that use `req.cache`:
    /// PUT /v/:key[?ttl=s] sets the body, GET /v/:key reads a String (404 when missing), GET
    /// /n/:key reads an Int, DELETE /v/:key deletes.
    func makeApplication(
        configuration: DiskCache.Configuration = .init(), coder: LMDBVaporCache.Coder = .json
    ) async throws -> Application {
        let app = try await Application.make(.testing)
        app.caches.use(.lmdb(directory: directory.url, configuration: configuration, coder: coder))
        app.put("v", ":key") { req async throws -> HTTPStatus in
            let key = try req.parameters.require("key")
            let ttl = req.query[Int.self, at: "ttl"]
            try await req.cache.set(key, to: req.body.string ?? "", expiresIn: ttl.map { .seconds($0) })
            return .ok
        }
        app.get("v", ":key") { req async throws -> String in
            guard let value: String = try await req.cache.get(try req.parameters.require("key")) else {
                throw Abort(.notFound)
            }
            return value
        }
        app.get("n", ":key") { req async throws -> String in
            let value = try await req.cache.get(try req.parameters.require("key"), as: Int.self)
            return value.map(String.init) ?? "miss"
        }
        app.delete("v", ":key") { req async throws -> HTTPStatus in
            try await req.cache.delete(try req.parameters.require("key"))
            return .noContent
        }
        return app
    }

    /// Runs `body` with an application from ``makeApplication(configuration:coder:)`` and shuts it
    /// down afterwards, also when `body` throws.
    func withApplication(
        configuration: DiskCache.Configuration = .init(), coder: LMDBVaporCache.Coder = .json,
        _ body: (Application) async throws -> Void
    ) async throws {
        let app = try await makeApplication(configuration: configuration, coder: coder)
        do {
            try await body(app)
        } catch {
            try? await app.asyncShutdown()
            throw error
        }
        try await app.asyncShutdown()
    }

    func testSetGetExpiryDelete() async throws {
        let time = ManualClock()
        var configuration = DiskCache.Configuration()
        configuration.clock = time.clock
        try await withApplication(configuration: configuration) { app in
            try await app.test(.PUT, "v/a", body: ByteBuffer(string: "one")) { response async in
                XCTAssertEqual(response.status, .ok)
            }
            try await app.test(.GET, "v/a") { response async in XCTAssertEqual(response.body.string, "one") }
            try await app.test(.PUT, "v/a", body: ByteBuffer(string: "two")) { response async in
                XCTAssertEqual(response.status, .ok)
            }
            try await app.test(.GET, "v/a") { response async in XCTAssertEqual(response.body.string, "two") }

            // expiresIn on the cache's clock: there at 59 s, gone at 60 s.
            try await app.test(.PUT, "v/t?ttl=60", body: ByteBuffer(string: "short")) { response async in
                XCTAssertEqual(response.status, .ok)
            }
            time.advance(by: .seconds(59))
            try await app.test(.GET, "v/t") { response async in XCTAssertEqual(response.body.string, "short") }
            time.advance(by: .seconds(1))
            try await app.test(.GET, "v/t") { response async in XCTAssertEqual(response.status, .notFound) }

            // A zero or negative lifetime removes what was there.
            try await app.test(.PUT, "v/z", body: ByteBuffer(string: "kept")) { _ async in }
            try await app.test(.PUT, "v/z?ttl=0", body: ByteBuffer(string: "gone")) { response async in
                XCTAssertEqual(response.status, .ok)
            }
            try await app.test(.GET, "v/z") { response async in XCTAssertEqual(response.status, .notFound) }

            try await app.test(.DELETE, "v/a") { response async in XCTAssertEqual(response.status, .noContent) }
            try await app.test(.GET, "v/a") { response async in XCTAssertEqual(response.status, .notFound) }

            // set(nil) deletes, as Vapor's Cache says.
            try await app.cache.set("b", to: "value")
            try await app.cache.set("b", to: String?.none)
            let deleted: String? = try await app.cache.get("b")
            XCTAssertNil(deleted)
        }
    }

    /// `CacheExpirationTime.seconds` traps on `.days(Int.max)`; the cache does not.
    func testExtremeLifetimes() async throws {
        try await withApplication { app in
            try await app.cache.set("forever", to: "f", expiresIn: .days(Int.max))
            try await app.cache.set("past", to: "p", expiresIn: .days(Int.min))
            try await app.cache.set("minutes", to: "m", expiresIn: .minutes(Int.max / 2))
            let forever: String? = try await app.cache.get("forever")
            let past: String? = try await app.cache.get("past")
            let minutes: String? = try await app.cache.get("minutes")
            XCTAssertEqual(forever, "f")
            XCTAssertNil(past)
            XCTAssertEqual(minutes, "m")
        }
    }

    /// A value stored as another type is a miss, as with Vapor's MemoryCache, and stays stored.
    func testTypeMismatchIsAMiss() async throws {
        try await withApplication { app in
            try await app.test(.PUT, "v/s", body: ByteBuffer(string: "text")) { _ async in }
            try await app.test(.GET, "n/s") { response async in XCTAssertEqual(response.body.string, "miss") }
            try await app.test(.GET, "v/s") { response async in XCTAssertEqual(response.body.string, "text") }
            try await app.cache.set("i", to: 42)
            try await app.test(.GET, "n/i") { response async in XCTAssertEqual(response.body.string, "42") }
        }
    }

    func testPropertyListCoder() async throws {
        struct Article: Codable, Equatable, Sendable { var id: Int; var title: String; var published: Date }
        try await withApplication(coder: .propertyList) { app in
            let article = Article(id: 7, title: "Caches", published: Date(timeIntervalSince1970: 1_700_000_000))
            try await app.cache.set("article", to: article)
            let read: Article? = try await app.cache.get("article")
            XCTAssertEqual(read, article)
            // A property list cannot hold a lone string or number at its top level; the coder
            // stores them all the same.
            try await app.cache.set("text", to: "words")
            try await app.cache.set("number", to: 42)
            let text: String? = try await app.cache.get("text")
            let number: Int? = try await app.cache.get("number")
            XCTAssertEqual(text, "words")
            XCTAssertEqual(number, 42)
        }
    }

    /// The store is shared with other processes while the application runs, and is flushed and
    /// closed when it shuts down.
    func testSecondProcessAndShutdown() async throws {
        let app = try await makeApplication()
        let disk: DiskCache
        do {
            try await app.test(.PUT, "v/mine", body: ByteBuffer(string: "from vapor")) { response async in
                XCTAssertEqual(response.status, .ok)
            }

            // Another process writes a key (the JSON of a string); the application reads it.
            let writer = try HelperProcess(["put", directory.path, "theirs", "\"from another process\""])
            XCTAssertEqual(writer.readLine(), "stored")
            XCTAssertEqual(writer.wait(), 0)
            try await app.test(.GET, "v/theirs") { response async in
                XCTAssertEqual(response.body.string, "from another process")
            }
            disk = try XCTUnwrap(app.cache as? LMDBVaporCache).disk
        } catch {
            try? await app.asyncShutdown()
            throw error
        }
        try await app.asyncShutdown()
        XCTAssertThrowsError(try disk.data(forKey: "mine")) { XCTAssertEqual($0 as? CacheError, .closed) }

        // Shutdown flushed: another process reads what the application wrote.
        let reader = try HelperProcess(["read", directory.path, "mine"])
        XCTAssertEqual(reader.readLine(), "\"from vapor\"")
        XCTAssertEqual(reader.wait(), 0)
    }

    /// A store that cannot be opened fails the boot with the reason, and every call with it.
    func testOpenFailureFailsBootAndCalls() async throws {
        // A regular file where the directory should be.
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let file = directory.url.appendingPathComponent("not-a-directory")
        try Data("x".utf8).write(to: file)
        let app = try await Application.make(.testing)
        app.caches.use(.lmdb(directory: file))
        do {
            try await app.cache.set("k", to: "v")
            XCTFail("set succeeded on a store that did not open")
        } catch {
            XCTAssertTrue(error is CacheError, "\(error)")
        }
        do {
            try await app.asyncBoot()
            XCTFail("boot succeeded on a store that did not open")
        } catch {
            XCTAssertTrue(error is CacheError, "\(error)")
        }
        try await app.asyncShutdown()
    }

    /// Encoding and decoding run on the thread pool, not on an event loop.
    func testCodingOffTheEventLoop() async throws {
        let onEventLoop = NIOLockedValueBox<[String]>([])
        let coder = LMDBVaporCache.Coder(
            encode: { value in
                if MultiThreadedEventLoopGroup.currentEventLoop != nil {
                    onEventLoop.withLockedValue { $0.append("encode") }
                }
                return Array(try JSONEncoder().encode(value))
            },
            decode: { type, bytes in
                if MultiThreadedEventLoopGroup.currentEventLoop != nil {
                    onEventLoop.withLockedValue { $0.append("decode") }
                }
                return try JSONDecoder().decode(type, from: Data(bytes))
            })
        try await withApplication(coder: coder) { app in
            app.get("coded") { req -> EventLoopFuture<String> in
                // A future-based route: the call starts on the request's event loop.
                req.cache.set("k", to: 1).flatMap { req.cache.get("k", as: Int.self) }.map { "\($0 ?? -1)" }
            }
            try await app.test(.GET, "coded") { response async in XCTAssertEqual(response.body.string, "1") }
        }
        XCTAssertEqual(onEventLoop.withLockedValue { $0 }, [])
    }

    /// The empty key holds nothing: reads are misses, deletes do nothing, writes fail clearly.
    func testEmptyKey() async throws {
        try await withApplication { app in
            let value: String? = try await app.cache.get("")
            XCTAssertNil(value)
            try await app.cache.delete("")
            do {
                try await app.cache.set("", to: "v")
                XCTFail("set of the empty key succeeded")
            } catch let error as CacheError {
                guard case .invalidKey = error else { return XCTFail("\(error)") }
            }
        }
    }

    /// A later provider replaces a store that did not open: the boot does not fail for it.
    func testReplacedProviderDoesNotFailBoot() async throws {
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let file = directory.url.appendingPathComponent("not-a-directory")
        try Data("x".utf8).write(to: file)
        let app = try await Application.make(.testing)
        app.caches.use(.lmdb(directory: file))
        app.caches.use(.memory)
        do {
            try await app.asyncBoot()
        } catch {
            XCTFail("the boot failed for a cache no longer in use: \(error)")
        }
        try await app.asyncShutdown()
    }

    /// A request still running when the application shuts down finishes with the store open, and
    /// its write is on disk afterwards.
    func testRequestRunningAtShutdown() async throws {
        let environment = Environment(
            name: "testing", arguments: ["vapor", "serve", "--hostname", "127.0.0.1", "--port", "0"])
        let app = try await Application.make(environment)
        // Registered before the cache's, so it runs after the cache's own shutdown handler: the
        // route writes only once that handler has run.
        let (proceed, release) = AsyncStream<Void>.makeStream()
        app.lifecycle.use(ReleaseOnShutdown(release: release))
        app.caches.use(.lmdb(directory: directory.url))
        let (entered, enter) = AsyncStream<Void>.makeStream()
        app.get("slow") { req async throws -> String in
            enter.yield()
            for await _ in proceed { break }
            try await req.cache.set("late", to: "written during shutdown")
            return "ok"
        }
        let status: HTTPResponseStatus
        do {
            try await app.startup()
            let port = try XCTUnwrap(app.http.server.shared.localAddress?.port)
            let response = Task {
                try await HTTPClient.shared.execute(
                    // Only a hang reaches it: the request's status is the verdict, not its time.
                    HTTPClientRequest(url: "http://127.0.0.1:\(port)/slow"), timeout: .seconds(300)
                ).status
            }
            for await _ in entered { break }
            try await app.asyncShutdown()
            status = try await response.value
        } catch {
            if !app.didShutdown { try? await app.asyncShutdown() }
            throw error
        }
        XCTAssertEqual(status, .ok)
        let reader = try HelperProcess(["read", directory.path, "late"])
        XCTAssertEqual(reader.readLine(), "\"written during shutdown\"")
        XCTAssertEqual(reader.wait(), 0)
    }
}

/// Lets a waiting route go on when the application's shutdown reaches it.
struct ReleaseOnShutdown: LifecycleHandler {
    let release: AsyncStream<Void>.Continuation

    func shutdown(_ application: Application) {
        release.yield()
    }
}
#endif
