#if Redis
import Foundation
import RESP
import Testing

@testable import LMDBCacheRedis

@Suite("Redis client: the pub/sub subscriber against a real redis-server")
struct RedisSubscriberTests {
    @Test(
        "messages published are delivered; after a restart the subscriber resubscribes and says so",
        arguments: [RedisClientConfiguration.ProtocolVersion.resp2, .resp3])
    func subscribeAndResubscribe(version: RedisClientConfiguration.ProtocolVersion) async throws {
        let server = try await RedisServer(password: "pw")
        defer { server.stop() }
        let messages = Recorder<[UInt8]>()
        let subscriptions = Recorder<Bool>()
        let channel = bytes("invalidations")
        let subscriber = try RedisSubscriber(
            configuration: server.configuration(protocolVersion: version), channel: channel, logger: testLogger,
            onMessage: { messages.record($0) }, onSubscribed: { subscriptions.record($0) })
        subscriber.start()
        let publisher = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        await waitFor("the subscriber subscribed") { subscriptions.all == [false] }
        let payloads: [[UInt8]] = [bytes("one"), [0, 13, 10, 255], [], [UInt8](repeating: 7, count: 100_000)]
        for payload in payloads {
            let replies = try await publisher.execute(
                [RedisCommand("PUBLISH", channel, payload)], timeout: hangBound)
            #expect(replies == [.integer(1)], "one subscriber received it")
        }
        // Another channel's messages are not delivered.
        _ = try await publisher.execute([RedisCommand("PUBLISH", bytes("other"), bytes("x"))], timeout: hangBound)
        await waitFor("every message was delivered") { messages.all.count == payloads.count }
        #expect(messages.all == payloads)

        // (Counted from here: on a busy machine a late PONG may have had it resubscribe already.)
        let before = subscriptions.all.count
        try await server.restart()
        await waitFor("resubscribed after the restart") { subscriptions.all.count > before }
        #expect(subscriptions.all.first == false && subscriptions.all.dropFirst().allSatisfy { $0 })
        await waitFor("a message published after the restart reached one subscriber") {
            (try? await publisher.execute([RedisCommand("PUBLISH", channel, bytes("after"))], timeout: .seconds(5)))
                == [.integer(1)]
        }
        await waitFor("the message published after the restart was delivered") { messages.all.last == bytes("after") }
        await subscriber.close()
        // Closed: it is no longer subscribed.
        // (The server notices the closed connection on its own time.)
        await waitFor("the server saw the subscriber go") {
            let remaining = try? await publisher.execute(
                [RedisCommand("PUBSUB", bytes("NUMSUB"), channel)], timeout: .seconds(5))
            return remaining == [.array([.bulkString(channel), .integer(0)])]
        }
        await publisher.close()
    }

    @Test("a subscriber started while Redis is down subscribes once it is up")
    func startsWhileDown() async throws {
        let server = try await RedisServer()
        defer { server.stop() }
        server.kill()
        let subscriptions = Recorder<Bool>()
        let subscriber = try RedisSubscriber(
            configuration: server.configuration(), channel: bytes("c"), logger: testLogger,
            onMessage: { _ in }, onSubscribed: { subscriptions.record($0) })
        subscriber.start()
        try await server.restart()
        await waitFor("the subscriber subscribed once Redis was up") { subscriptions.all == [false] }
        await subscriber.close()
    }

    @Test("a server that stops answering is noticed by the PING health check; the subscriber resubscribes")
    func healthCheck() async throws {
        let server = try await RedisServer()
        defer { server.stop() }
        let subscriptions = Recorder<Bool>()
        let subscriber = try RedisSubscriber(
            configuration: server.configuration(), channel: bytes("c"), logger: testLogger,
            healthCheckInterval: .milliseconds(200), onMessage: { _ in }, onSubscribed: { subscriptions.record($0) })
        subscriber.start()
        await waitFor("the subscriber subscribed") { subscriptions.all == [false] }
        // A busy machine may delay a PONG past two health checks and have the subscriber
        // resubscribe before the stall too: counted from here, not from the start.
        let before = subscriptions.all.count
        server.pause()
        // No FIN, no RST: only the unanswered PINGs reveal the stall.
        await waitFor("the stalled connection was dropped") { !subscriber.isConnected }
        server.resume()
        await waitFor("the subscriber resubscribed after the stall") { subscriptions.all.count > before }
        #expect(subscriptions.all.first == false && subscriptions.all.dropFirst().allSatisfy { $0 })
        await subscriber.close()
    }
}
#endif
