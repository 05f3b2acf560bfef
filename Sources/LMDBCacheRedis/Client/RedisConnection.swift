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

    private init(endpoint: RedisEndpoint, channel: any Channel, firstError: FirstError) {
        self.endpoint = endpoint
        self.channel = channel
        self.firstError = firstError
    }

    /// Whether the channel is still open (it may yet fail on the next send).
    var isActive: Bool { channel.isActive }

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
        let configuration = connector.configuration
        let remaining = deadline - .now
        guard remaining > .zero else { throw .connectFailed("\(endpoint): no time left to connect") }
        let firstError = FirstError()
        let recordError: @Sendable (any Error) -> Void = { firstError.record($0) }
        let sslContext = connector.sslContext
        let hostname = configuration.tlsServerHostname ?? endpoint.host
        let limits = configuration.parserLimits
        let bootstrap = ClientBootstrap(group: eventLoopGroup)
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
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: endpoint.host, port: endpoint.port).get()
        } catch {
            throw .connectFailed("\(endpoint): \(error)")
        }
        let connection = RedisConnection(endpoint: endpoint, channel: channel, firstError: firstError)
        do throws(RedisClientError) {
            try await connection.handshake(configuration, deadline: deadline)
        } catch {
            await connection.close()
            throw error
        }
        logger.debug("redis: connected", metadata: ["endpoint": "\(endpoint)"])
        return connection
    }

    /// `HELLO 3` (with the credentials), or `AUTH`, or a `PING`: one exchange, so a connection is
    /// returned only once the server (and TLS) has answered.
    private func handshake(_ configuration: RedisClientConfiguration, deadline: ContinuousClock.Instant)
        async throws(RedisClientError)
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
        let replies: [RESPValue]
        do throws(RedisClientError) {
            replies = try await send([command], timeout: deadline - .now)
        } catch .timedOut {
            throw .connectFailed("\(endpoint): no answer to the handshake in time")
        } catch {
            let reason = firstError.text ?? "the connection closed during the handshake"
            throw .connectFailed("\(endpoint): \(reason)")
        }
        guard case .error(let message) = replies.first else { return }
        let text = String(decoding: message, as: UTF8.self)
        // NOAUTH: the server wants a password none was given for; WRONGPASS, or an AUTH refused.
        if isAuthentication || text.hasPrefix("NOAUTH") || text.hasPrefix("WRONGPASS") {
            throw .authenticationFailed("\(endpoint): \(text)")
        }
        throw .connectFailed("\(endpoint): \(String(decoding: command.arguments[0], as: UTF8.self)) refused: \(text)")
    }

    /// Sends `commands` in one write and returns their replies in order (error replies as values).
    ///
    /// - Throws: ``RedisClientError/timedOut`` when the replies are not all in within `timeout`
    ///   (the connection is then closed: its replies would no longer match its commands);
    ///   ``RedisClientError/connectionClosed`` when it closes first; ``RedisClientError/protocolViolation(_:)``
    ///   when the server's bytes are not RESP.
    func send(_ commands: [RedisCommand], timeout: Duration) async throws(RedisClientError) -> [RESPValue] {
        guard !commands.isEmpty else { return [] }
        let promise = channel.eventLoop.makePromise(of: [RESPValue].self)
        write(commands, replies: promise)
        let channel = self.channel
        let timeoutTask = channel.eventLoop.scheduleTask(in: TimeAmount(max(timeout, .zero))) {
            promise.fail(RedisClientError.timedOut)
            channel.close(promise: nil)
        }
        promise.futureResult.whenComplete { _ in timeoutTask.cancel() }
        do {
            return try await promise.futureResult.get()
        } catch let error as RedisClientError {
            throw error
        } catch {
            throw .connectionClosed
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
        channel.close(promise: nil)
        try? await channel.closeFuture.get()
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
