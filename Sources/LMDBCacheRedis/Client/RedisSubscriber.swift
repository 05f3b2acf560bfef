#if Redis
import Logging
import NIOCore
import NIOPosix
import RESP
import Synchronization

/// A subscription to one pub/sub channel on a connection of its own, kept alive across failures.
///
/// ``start()`` connects in the background to the first reachable endpoint, sends `SUBSCRIBE`, and
/// hands every message's payload to `onMessage`. After any failure (the connection closes, the
/// server stops answering the periodic `PING`, an error reply) it reconnects with the configured
/// backoff, forever, until ``close()``. After each successful subscription it calls `onSubscribed`:
/// `false` the first time, `true` afterwards (messages may have been published while it was away).
///
/// The callbacks run on a NIO event loop or a task of the subscriber's, one at a time and in order:
/// they must return quickly.
final class RedisSubscriber: Sendable {
    private let connector: RedisConnector
    private let channel: [UInt8]
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let onMessage: @Sendable ([UInt8]) -> Void
    private let onSubscribed: @Sendable (_ isResubscription: Bool) -> Void
    private let healthCheckInterval: Duration
    private let state = Mutex(State())

    /// Messages held for the consumer at most, per connection (default: 16,384).
    private let bufferLimit: Int
    private let lost = ReceivedCount()

    /// Messages lost because the buffer was full (each loss ends its connection).
    var messagesLost: Int { lost.value }

    /// Opens when the server first confirms the subscription: lookups wait for it.
    let firstSubscription = SubscriptionGate()

    private struct State {
        var task: Task<Void, Never>?
        var connection: RedisConnection?
        var isClosed = false
        /// The server confirmed the subscription on `connection`.
        var isSubscribed = false
    }

    /// A subscriber to `channel` with `configuration`'s endpoints, credentials, TLS, protocol and
    /// backoff, on `eventLoopGroup` (default: NIO's shared group). It checks the connection with a
    /// `PING` every `healthCheckInterval` (default: 1 s) and reconnects when two go unanswered.
    /// Messages waiting for `onMessage` are held up to `bufferLimit`; past it they are lost, and
    /// the subscriber reconnects, so `onSubscribed(true)` reports them missed.
    ///
    /// - Throws: ``RedisClientError/connectFailed(_:)`` when the TLS configuration cannot be loaded.
    init(
        configuration: RedisClientConfiguration, channel: [UInt8],
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger,
        healthCheckInterval: Duration = .seconds(1), bufferLimit: Int = 16_384,
        onMessage: @escaping @Sendable ([UInt8]) -> Void,
        onSubscribed: @escaping @Sendable (_ isResubscription: Bool) -> Void
    ) throws(RedisClientError) {
        self.connector = try RedisConnector(configuration: configuration)
        self.channel = channel
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.healthCheckInterval = healthCheckInterval
        self.bufferLimit = max(1, bufferLimit)
        self.onMessage = onMessage
        self.onSubscribed = onSubscribed
    }

    /// Starts subscribing in the background; does nothing if already started or closed.
    func start() {
        state.withLock { state in
            guard state.task == nil, !state.isClosed else { return }
            state.task = Task { await self.run() }
        }
    }

    /// Stops: closes the connection, ends the reconnect loop, and returns once it has ended. No
    /// callback runs after it returns.
    func close() async {
        let (task, connection) = state.withLock { state in
            state.isClosed = true
            return (state.task, state.connection)
        }
        task?.cancel()
        await connection?.close()
        await task?.value
    }

    private var isClosed: Bool { state.withLock { $0.isClosed } }

    /// Whether a connection is up (connected and handshaken; subscribed or about to be).
    var isConnected: Bool { state.withLock { $0.connection != nil } }

    /// Whether the server has confirmed the subscription on the current connection.
    var isSubscribed: Bool { state.withLock { $0.isSubscribed } }

    /// Connects, subscribes and reads until failure, again and again with backoff, until closed.
    private func run() async {
        var failures = 0
        var subscriptions = 0
        var attempt = 0
        let endpoints = connector.configuration.endpoints
        while !isClosed, !Task.isCancelled, !endpoints.isEmpty {
            let endpoint = endpoints[attempt % endpoints.count]
            attempt += 1
            if await session(endpoint: endpoint, subscriptions: &subscriptions) {
                failures = 0
            } else {
                failures += 1
            }
            guard !isClosed else { return }
            let delay = connector.configuration.reconnectBackoff.delay(afterFailures: max(failures, 1))
            do { try await Task.sleep(for: delay) } catch { return }
        }
    }

    /// One connection's life: connect, subscribe, deliver messages until it ends. True if it subscribed.
    private func session(endpoint: RedisEndpoint, subscriptions: inout Int) async -> Bool {
        // Bounded: a consumer that falls this far behind loses messages, and then the connection
        // (below), so the next subscription reports them missed (`onSubscribed(true)`).
        let (values, continuation) = AsyncStream<RESPValue>.makeStream(
            bufferingPolicy: .bufferingOldest(bufferLimit))
        let overflowed = ReceivedCount()
        let lost = self.lost
        let connection: RedisConnection
        do throws(RedisClientError) {
            connection = try await RedisConnection.connect(
                to: endpoint, using: connector, eventLoopGroup: eventLoopGroup,
                deadline: .now + connector.configuration.connectTimeout, logger: logger,
                onUnsolicited: { value in
                    if case .dropped = continuation.yield(value) {
                        overflowed.increment()
                        lost.increment()
                    }
                })
        } catch {
            logger.debug(
                "redis subscriber: connect failed", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            return false
        }
        connection.closeFuture.whenComplete { _ in continuation.finish() }
        let registered = state.withLock { state in
            guard !state.isClosed else { return false }
            state.connection = connection
            return true
        }
        guard registered else {
            await connection.close()
            return false
        }
        connection.sendUnanswered([RedisCommand("SUBSCRIBE", channel)])
        // The health check: a PING each interval; a connection with nothing received over two
        // intervals is closed, which ends the loop below.
        let received = ReceivedCount()
        let healthCheck = Task { [healthCheckInterval] in
            var seen = -1
            while !Task.isCancelled {
                do { try await Task.sleep(for: healthCheckInterval) } catch { return }
                connection.sendUnanswered([RedisCommand("PING")])
                do { try await Task.sleep(for: healthCheckInterval) } catch { return }
                let now = received.value
                if now == seen {
                    self.logger.warning("redis subscriber: no answer to PING, reconnecting")
                    await connection.close()
                    return
                }
                seen = now
            }
        }
        var subscribed = false
        for await value in values {
            received.increment()
            if overflowed.value > 0 {
                logger.warning(
                    "redis subscriber: messages arrived faster than they were taken; some were lost, resubscribing",
                    metadata: ["buffered": "\(bufferLimit)"])
                await connection.close()
                break
            }
            guard let (kind, payload) = Self.pubSubEvent(value) else {
                if case .error(let message) = value {
                    // The health check's PING refused by a server still loading its data (or
                    // running a long script): an answer, the subscription stands.
                    if message.starts(with: Array("LOADING".utf8)) || message.starts(with: Array("BUSY".utf8)) {
                        continue
                    }
                    logger.warning(
                        "redis subscriber: error reply",
                        metadata: ["error": "\(String(decoding: message, as: UTF8.self))"])
                    await connection.close()
                }
                continue
            }
            switch kind {
            case "subscribe":
                guard !subscribed else { continue }
                subscribed = true
                subscriptions += 1
                state.withLock { state in
                    if state.connection === connection { state.isSubscribed = true }
                }
                logger.debug("redis subscriber: subscribed", metadata: ["endpoint": "\(endpoint)"])
                onSubscribed(subscriptions > 1)
                firstSubscription.open()
            case "message":
                if let payload { onMessage(payload) }
            default:
                continue
            }
        }
        healthCheck.cancel()
        await healthCheck.value
        await connection.close()
        state.withLock { state in
            if state.connection === connection {
                state.connection = nil
                state.isSubscribed = false
            }
        }
        if !isClosed { logger.info("redis subscriber: connection lost", metadata: ["endpoint": "\(endpoint)"]) }
        return subscribed
    }

    /// A pub/sub event's kind (`subscribe`, `message`, `pong`, …) and its last element's bytes, from
    /// a RESP2 array or RESP3 push; nil for any other value.
    private static func pubSubEvent(_ value: RESPValue) -> (String, [UInt8]?)? {
        let elements: [RESPValue]
        switch value {
        case .array(let array?): elements = array
        case .push(let push): elements = push
        default: return nil
        }
        guard case .bulkString(let kind?)? = elements.first else { return nil }
        var payload: [UInt8]?
        if elements.count >= 3, case .bulkString(let bytes?) = elements[elements.count - 1] { payload = bytes }
        return (String(decoding: kind, as: UTF8.self).lowercased(), payload)
    }
}
/// How many values a subscriber's connection has received, read by its health check.
private final class ReceivedCount: Sendable {
    private let count = Atomic<Int>(0)

    /// The values counted so far.
    var value: Int { count.load(ordering: .relaxed) }

    /// Counts one more value.
    func increment() { count.add(1, ordering: .relaxed) }
}
#endif
