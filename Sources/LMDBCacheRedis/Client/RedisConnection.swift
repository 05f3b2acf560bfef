#if Redis
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import RESP
import Synchronization

/// One connection to a Redis server: a NIO channel that pipelines commands and matches replies in
/// order. Made ready by ``connect(to:using:eventLoopGroup:deadline:logger:onUnsolicited:)`` (TCP,
/// optional TLS, `AUTH`, optional `HELLO 3`).
///
/// Once closed (by either side, by a timeout or by a protocol violation) it stays closed: every
/// later ``send(_:timeout:)`` throws ``RedisClientError/connectionClosed``; a pool replaces it.
final class RedisConnection: Sendable {
    /// The server this connection reaches.
    let endpoint: RedisEndpoint
    private let channel: any Channel
    /// The first error the channel met (TLS, I/O, protocol), to explain a failed handshake.
    private let firstError: FirstError
    /// Requests sent and not yet answered (nor failed).
    private let requestsInFlight = Atomic<Int>(0)

    private init(endpoint: RedisEndpoint, channel: any Channel, firstError: FirstError) {
        self.endpoint = endpoint
        self.channel = channel
        self.firstError = firstError
    }

    /// Whether the channel is still open (it may yet fail on the next send).
    var isActive: Bool { channel.isActive }

    /// How many of ``send(_:timeout:)``'s requests await their replies: a pool sends the next
    /// request on its least busy connection, so that one request held up (a write during
    /// `CLIENT PAUSE WRITE`, a slow script) does not hold up those behind it.
    var inFlight: Int { requestsInFlight.load(ordering: .relaxed) }

    /// A future completed when the connection has closed, for whatever reason.
    var closeFuture: EventLoopFuture<Void> { channel.closeFuture }

    /// Connects to `endpoint` and runs the handshake `connector`'s configuration asks for.
    ///
    /// - Parameters:
    ///   - deadline: when to give up; the TCP connect is also bounded by the configured connect timeout.
    ///   - onUnsolicited: receives RESP3 push frames and values answering no command (pub/sub
    ///     messages); nil makes those a protocol violation.
    /// - Throws: ``RedisClientError/connectFailed(_:)`` (unreachable, refused, TLS failure, deadline
    ///   passed), ``RedisClientError/authenticationFailed(_:)`` (`AUTH` or `HELLO` refused).
    static func connect(
        to endpoint: RedisEndpoint, using connector: RedisConnector, eventLoopGroup: any EventLoopGroup,
        deadline: ContinuousClock.Instant, logger: Logger, onUnsolicited: (@Sendable (RESPValue) -> Void)? = nil
    ) async throws(RedisClientError) -> RedisConnection {
        let future = startConnecting(
            to: endpoint, using: connector, eventLoopGroup: eventLoopGroup, deadline: deadline, logger: logger,
            onUnsolicited: onUnsolicited)
        do {
            return try await future.get()
        } catch {
            throw clientError(error, endpoint: endpoint)
        }
    }

    /// ``connect(to:using:eventLoopGroup:deadline:logger:onUnsolicited:)`` as a future, failed with a
    /// ``RedisClientError``.
    ///
    /// Every step (TCP, TLS, the handshake's reply, closing after a failed handshake) runs on the
    /// channel's event loop, so the outcome is known as soon as the server has answered, whether or
    /// not a Swift concurrency thread is free to run a task at that moment: a caller whose deadline
    /// runs on the event loop too gets the server's answer, not a timeout, when the cooperative
    /// pool is busy.
    static func startConnecting(
        to endpoint: RedisEndpoint, using connector: RedisConnector, eventLoopGroup: any EventLoopGroup,
        deadline: ContinuousClock.Instant, logger: Logger, onUnsolicited: (@Sendable (RESPValue) -> Void)? = nil
    ) -> EventLoopFuture<RedisConnection> {
        let eventLoop = eventLoopGroup.next()
        let configuration = connector.configuration
        let remaining = deadline - .now
        guard remaining > .zero else {
            return eventLoop.makeFailedFuture(RedisClientError.connectFailed("\(endpoint): no time left to connect"))
        }
        let firstError = FirstError()
        let recordError: @Sendable (any Error) -> Void = { firstError.record($0) }
        let sslContext = connector.sslContext
        let hostname = configuration.tlsServerHostname ?? endpoint.host
        let limits = configuration.parserLimits
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(min(configuration.connectTimeout, remaining)))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let sslContext {
                        // SNI only for a name: an IP address as server name is refused by the handler.
                        let isAddress = (try? SocketAddress(ipAddress: hostname, port: 0)) != nil
                        try sync.addHandler(
                            try NIOSSLClientHandler(context: sslContext, serverHostname: isAddress ? nil : hostname)
                        )
                    }
                    try sync.addHandler(
                        RedisReplyHandler(limits: limits, onUnsolicited: onUnsolicited, onError: recordError)
                    )
                }
            }
        return bootstrap.connect(host: endpoint.host, port: endpoint.port)
            .flatMapErrorThrowing { error in throw RedisClientError.connectFailed("\(endpoint): \(error)") }
            .flatMap { channel in
                let connection = RedisConnection(endpoint: endpoint, channel: channel, firstError: firstError)
                return connection.handshake(configuration, deadline: deadline)
                    .map { () -> RedisConnection in
                        logger.debug("redis: connected", metadata: ["endpoint": "\(endpoint)"])
                        return connection
                    }
                    .flatMapError { error in
                        // Closed before the failure is reported: a failed connect leaves no channel open.
                        let failed = channel.eventLoop.makePromise(of: RedisConnection.self)
                        channel.close(promise: nil)
                        channel.closeFuture.whenComplete { _ in failed.fail(error) }
                        return failed.futureResult
                    }
            }
    }

    /// `error` as the ``RedisClientError`` it is, or as a connect failure to `endpoint`.
    static func clientError(_ error: any Error, endpoint: RedisEndpoint) -> RedisClientError {
        error as? RedisClientError ?? .connectFailed("\(endpoint): \(error)")
    }

    /// `HELLO 3` (with the credentials), or `AUTH`, or a `PING`: one exchange, so a connection is
    /// returned only once the server (and TLS) has answered. The future fails with
    /// ``RedisClientError/authenticationFailed(_:)`` or ``RedisClientError/connectFailed(_:)``.
    private func handshake(_ configuration: RedisClientConfiguration, deadline: ContinuousClock.Instant)
        -> EventLoopFuture<Void>
    {
        let command: RedisCommand
        var isAuthentication = configuration.password != nil
        switch (configuration.protocolVersion, configuration.password) {
        case (.resp3, let password?):
            command = RedisCommand(
                "HELLO", Array("3".utf8), Array("AUTH".utf8), Array((configuration.username ?? "default").utf8),
                Array(password.utf8))
        case (.resp3, nil):
            command = RedisCommand("HELLO", Array("3".utf8))
            isAuthentication = false
        case (.resp2, let password?):
            command =
                configuration.username.map { RedisCommand("AUTH", Array($0.utf8), Array(password.utf8)) }
                ?? RedisCommand("AUTH", Array(password.utf8))
        case (.resp2, nil):
            command = RedisCommand("PING")
        }
        let endpoint = self.endpoint
        let firstError = self.firstError
        let authenticating = isAuthentication
        return startSending([command], timeout: deadline - .now)
            .flatMapErrorThrowing { error in
                if case .timedOut = error as? RedisClientError {
                    throw RedisClientError.connectFailed("\(endpoint): no answer to the handshake in time")
                }
                let reason = firstError.text ?? "the connection closed during the handshake"
                throw RedisClientError.connectFailed("\(endpoint): \(reason)")
            }
            .flatMapThrowing { replies in
                guard case .error(let message) = replies.first else { return }
                let text = String(decoding: message, as: UTF8.self)
                // NOAUTH: the server wants a password none was given for; WRONGPASS, or an AUTH refused.
                if authenticating || text.hasPrefix("NOAUTH") || text.hasPrefix("WRONGPASS") {
                    throw RedisClientError.authenticationFailed("\(endpoint): \(text)")
                }
                // A server still loading its data, or running a long script, refuses PING (HELLO
                // and AUTH it answers): it is there, and refuses each command the same way until
                // it is done, which the caller handles as it does every error reply.
                if !authenticating, text.hasPrefix("LOADING") || text.hasPrefix("BUSY") { return }
                let name = String(decoding: command.arguments[0], as: UTF8.self)
                throw RedisClientError.connectFailed("\(endpoint): \(name) refused: \(text)")
            }
    }

    /// Sends `commands` in one write and returns their replies in order (error replies as values).
    ///
    /// - Throws: ``RedisClientError/timedOut`` when the replies are not all in within `timeout`
    ///   (the connection is then closed: its replies would no longer match its commands);
    ///   ``RedisClientError/connectionClosed`` when it closes first; ``RedisClientError/protocolViolation(_:)``
    ///   when the server's bytes are not RESP.
    func send(_ commands: [RedisCommand], timeout: Duration) async throws(RedisClientError) -> [RESPValue] {
        do {
            return try await startSending(commands, timeout: timeout).get()
        } catch {
            throw error as? RedisClientError ?? .connectionClosed
        }
    }

    /// ``send(_:timeout:)`` as a future on the channel's event loop, failed with a ``RedisClientError``.
    private func startSending(_ commands: [RedisCommand], timeout: Duration) -> EventLoopFuture<[RESPValue]> {
        guard !commands.isEmpty else { return channel.eventLoop.makeSucceededFuture([]) }
        let promise = channel.eventLoop.makePromise(of: [RESPValue].self)
        requestsInFlight.add(1, ordering: .relaxed)
        write(commands, replies: promise)
        let channel = self.channel
        let timeoutTask = channel.eventLoop.scheduleTask(in: TimeAmount(max(timeout, .zero))) {
            promise.fail(RedisClientError.timedOut)
            channel.close(promise: nil)
        }
        promise.futureResult.whenComplete { _ in
            timeoutTask.cancel()
            self.requestsInFlight.subtract(1, ordering: .relaxed)
        }
        return promise.futureResult.flatMapErrorThrowing { error in
            throw error as? RedisClientError ?? .connectionClosed
        }
    }

    /// Writes `commands` whose replies come as unsolicited values (`SUBSCRIBE`), without awaiting them.
    func sendUnanswered(_ commands: [RedisCommand]) {
        write(commands, replies: nil)
    }

    private func write(_ commands: [RedisCommand], replies: EventLoopPromise<[RESPValue]>?) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(commands.reduce(0) { $0 + RESPEncoder.encodedCommandLength($1.arguments) })
        for command in commands { RESPEncoder.encodeCommand(command.arguments, into: &bytes) }
        let request = RedisRequest(bytes: ByteBuffer(bytes: bytes), replyCount: commands.count, promise: replies)
        // A write that cannot happen (the channel closed) never reaches the handler's queue.
        channel.writeAndFlush(request).whenFailure { _ in replies?.fail(RedisClientError.connectionClosed) }
    }

    /// Closes the connection (failing whatever awaits replies) and waits until it has closed.
    func close() async {
        try? await startClosing().get()
    }

    /// Starts closing the connection (failing whatever awaits replies); the future completes once
    /// it has closed.
    func startClosing() -> EventLoopFuture<Void> {
        channel.close(promise: nil)
        return channel.closeFuture
    }
}

/// The first error a channel met, kept to explain a failed handshake.
private final class FirstError: Sendable {
    private let storage = Mutex<String?>(nil)

    /// The first error recorded, described.
    var text: String? { storage.withLock { $0 } }

    /// Records `error` unless one was recorded before.
    func record(_ error: any Error) {
        storage.withLock { if $0 == nil { $0 = String(describing: error) } }
    }
}

/// What every connection of a client shares: its configuration and, with TLS, the context built once
/// from it (loading certificates is not done per connection).
struct RedisConnector: Sendable {
    /// The configuration connections are made with.
    let configuration: RedisClientConfiguration
    /// The TLS context, when the configuration asks for TLS.
    let sslContext: NIOSSLContext?

    /// A connector for `configuration`.
    ///
    /// - Throws: ``RedisClientError/connectFailed(_:)`` when the TLS configuration cannot be loaded.
    init(configuration: RedisClientConfiguration) throws(RedisClientError) {
        self.configuration = configuration
        do {
            sslContext = try configuration.tls.map { try NIOSSLContext(configuration: $0) }
        } catch {
            throw .connectFailed("TLS configuration: \(error)")
        }
    }
}
#endif
