#if Redis
import Logging
import NIOCore
import NIOPosix
import RESP
import Synchronization

/// A ``RedisExecutor`` over a few connections to one server.
///
/// Each request goes to the ready connection with the fewest requests awaiting replies, so one held
/// up (a write under `CLIENT PAUSE WRITE`, a slow script) does not hold up those behind it; while
/// every ready one is busy and a slot is free, a new connection is made (unless a connect failed
/// within its backoff). Connections are made when first needed and a closed one is replaced on its next use. After a
/// failed connect, further attempts wait out the configured backoff (10 ms doubling to 1 s by
/// default, with jitter); a caller arriving meanwhile fails at once with the last connect error, so
/// a server that is down costs callers no waiting and sees no storm of connects. While a connect is
/// running after failures, callers wait for it rather than start others.
///
/// ``execute(_:timeout:)`` never waits longer than its timeout in total, connecting included: a
/// connect outlives a caller that stops waiting for it, and serves the next one.
final class RedisConnectionPool: RedisExecutor {
    /// The server the pool connects to.
    let endpoint: RedisEndpoint
    private let connector: RedisConnector
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let state: Mutex<State>

    private enum Slot {
        case empty
        case connecting(EventLoopFuture<RedisConnection>)
        case ready(RedisConnection)
    }

    private struct State {
        var slots: [Slot]
        /// Where the search for a ready connection starts next (round robin among the least busy).
        var next = 0
        var consecutiveFailures = 0
        /// No connect before this instant, after a failure.
        var retryAfter: ContinuousClock.Instant?
        var lastFailure: RedisClientError?
        var isClosed = false
    }

    private enum Action {
        case use(RedisConnection)
        case wait(EventLoopFuture<RedisConnection>)
        case connect(slot: Int, EventLoopPromise<RedisConnection>)
        case fail(RedisClientError)
    }

    /// A pool of `configuration.poolSize` connections to `endpoint` (default: the configuration's
    /// first endpoint) on `eventLoopGroup` (default: NIO's shared singleton group).
    ///
    /// - Throws: ``RedisClientError/connectFailed(_:)`` when the configuration names no endpoint
    ///   or its TLS configuration cannot be loaded.
    init(
        configuration: RedisClientConfiguration, endpoint: RedisEndpoint? = nil,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger
    ) throws(RedisClientError) {
        guard let endpoint = endpoint ?? configuration.endpoints.first else {
            throw .connectFailed("no Redis endpoint configured")
        }
        self.endpoint = endpoint
        self.connector = try RedisConnector(configuration: configuration)
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.state = Mutex(State(slots: Array(repeating: .empty, count: configuration.poolSize)))
    }

    /// A pool sharing `connector` (its configuration and TLS context), as a cluster router makes one per node.
    init(
        connector: RedisConnector, endpoint: RedisEndpoint,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger
    ) {
        self.endpoint = endpoint
        self.connector = connector
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.state = Mutex(State(slots: Array(repeating: .empty, count: connector.configuration.poolSize)))
    }

    func execute(_ commands: [RedisCommand], timeout: Duration) async throws -> [RESPValue] {
        try await executeTyped(commands, timeout: timeout)
    }

    /// ``execute(_:timeout:)`` with its error type spelled out.
    func executeTyped(_ commands: [RedisCommand], timeout: Duration) async throws(RedisClientError) -> [RESPValue] {
        let deadline = ContinuousClock.now + timeout
        let connection = try await connection(deadline: deadline)
        let replies = try await connection.send(commands, timeout: deadline - .now)
        if replies.contains(where: Self.isReadOnlyRefusal) {
            // The server is a replica now (a failover demoted it): the connection leaves its slot
            // at once (no caller gets it again) and is closed, so the next command connects
            // again, and reaches the new primary where the endpoint's name or address has moved
            // to it. Commands still under way on it fail (their callers retry or miss). The
            // refusals count against the circuit, which bounds how often this happens.
            retire(connection)
        }
        return replies
    }

    /// Takes `connection` out of its slot and closes it.
    private func retire(_ connection: RedisConnection) {
        state.withLock { state in
            for index in state.slots.indices {
                if case .ready(let held) = state.slots[index], held === connection { state.slots[index] = .empty }
            }
        }
        _ = connection.startClosing()
    }

    /// Whether `reply` is `-READONLY`: a write sent to a replica.
    static func isReadOnlyRefusal(_ reply: RESPValue) -> Bool {
        guard case .error(let message) = reply else { return false }
        return message.starts(with: Array("READONLY".utf8))
    }

    /// A ready connection, made or waited for until `deadline`.
    private func connection(deadline: ContinuousClock.Instant) async throws(RedisClientError) -> RedisConnection {
        let action = state.withLock { state -> Action in
            if state.isClosed { return .fail(.closed) }
            let count = state.slots.count
            var empty: Int?
            var connecting: EventLoopFuture<RedisConnection>?
            // The least busy ready connection, the first from `next` among equals.
            var idlest: (index: Int, connection: RedisConnection, inFlight: Int)?
            for offset in 0..<count {
                let index = (state.next + offset) % count
                switch state.slots[index] {
                case .ready(let connection) where connection.isActive:
                    let inFlight = connection.inFlight
                    if idlest.map({ inFlight < $0.inFlight }) ?? true { idlest = (index, connection, inFlight) }
                case .connecting(let future):
                    connecting = connecting ?? future
                case .ready, .empty:
                    empty = empty ?? index
                }
            }
            // A busy connection is used when no other can be had at once: none empty, one being
            // made already, or a connect failed lately (backing off). A later call may grow the
            // pool again once the backoff has passed.
            let backingOff = state.retryAfter.map { ContinuousClock.now < $0 } ?? false
            if let idlest, idlest.inFlight == 0 || empty == nil || backingOff || connecting != nil {
                state.next = (idlest.index + 1) % count
                return .use(idlest.connection)
            }
            // After failures, one connect at a time: the others wait for it.
            if let connecting, empty == nil || state.consecutiveFailures > 0 { return .wait(connecting) }
            guard let empty else { return .fail(.connectFailed("\(endpoint): no connection slot")) }
            if let retryAfter = state.retryAfter, ContinuousClock.now < retryAfter {
                return .fail(state.lastFailure ?? .connectFailed("\(endpoint): backing off after a failed connect"))
            }
            let promise = eventLoopGroup.any().makePromise(of: RedisConnection.self)
            state.slots[empty] = .connecting(promise.futureResult)
            return .connect(slot: empty, promise)
        }
        switch action {
        case .use(let connection):
            return connection
        case .fail(let error):
            throw error
        case .wait(let future):
            return try await Self.wait(for: future, until: deadline)
        case .connect(let slot, let promise):
            connect(slot: slot, promise: promise)
            return try await Self.wait(for: promise.futureResult, until: deadline)
        }
    }

    /// Connects for `slot`, bounded by the configured connect timeout (not by the caller's), and
    /// records the outcome: the connection in its slot, or the failure and the next retry time.
    ///
    /// The whole attempt, its bookkeeping and `promise` run on event loops, not in a Swift task: the
    /// outcome reaches the callers waiting for it as soon as the server has answered, even while
    /// every thread of Swift's cooperative pool is busy (a caller's deadline runs on an event loop
    /// too, and must not beat an answer that came long before it).
    private func connect(slot: Int, promise: EventLoopPromise<RedisConnection>) {
        let configuration = connector.configuration
        let endpoint = self.endpoint
        let logger = self.logger
        RedisConnection.startConnecting(
            to: endpoint, using: connector, eventLoopGroup: eventLoopGroup,
            deadline: .now + configuration.connectTimeout, logger: logger
        ).whenComplete { outcome in
            let result = outcome.mapError { RedisConnection.clientError($0, endpoint: endpoint) }
            let (closedConnection, failures) = self.state.withLock { state -> (RedisConnection?, Int) in
                switch result {
                case .success(let connection):
                    if state.isClosed { return (connection, 0) }
                    state.slots[slot] = .ready(connection)
                    state.consecutiveFailures = 0
                    state.retryAfter = nil
                    state.lastFailure = nil
                    return (nil, 0)
                case .failure(let error):
                    state.slots[slot] = .empty
                    state.consecutiveFailures += 1
                    state.retryAfter =
                        .now + configuration.reconnectBackoff.delay(afterFailures: state.consecutiveFailures)
                    state.lastFailure = error
                    return (nil, state.consecutiveFailures)
                }
            }
            if let closedConnection {
                closedConnection.startClosing().whenComplete { _ in promise.fail(RedisClientError.closed) }
                return
            }
            if case .failure(let error) = result, failures == 1 {
                // Logged when the server stops answering, not at every retry.
                logger.warning("redis: connect failed", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            }
            promise.completeWith(result.mapError { $0 as any Error })
        }
    }

    /// The connection `future` promises, or ``RedisClientError/timedOut`` at `deadline`.
    private static func wait(
        for future: EventLoopFuture<RedisConnection>, until deadline: ContinuousClock.Instant
    ) async throws(RedisClientError) -> RedisConnection {
        let promise = future.eventLoop.makePromise(of: RedisConnection.self)
        future.cascade(to: promise)
        let timeout = future.eventLoop.scheduleTask(in: TimeAmount(max(deadline - .now, .zero))) {
            promise.fail(RedisClientError.timedOut)
        }
        promise.futureResult.whenComplete { _ in timeout.cancel() }
        do {
            return try await promise.futureResult.get()
        } catch let error as RedisClientError {
            throw error
        } catch {
            throw .connectFailed("\(error)")
        }
    }

    func everyPrimary() async throws -> [any RedisExecutor] { [self] }

    func close() async {
        let connections = state.withLock { state -> [RedisConnection] in
            state.isClosed = true
            let ready = state.slots.compactMap { slot -> RedisConnection? in
                if case .ready(let connection) = slot { return connection }
                return nil
            }
            state.slots = state.slots.map { _ in .empty }
            return ready
        }
        for connection in connections { await connection.close() }
    }
}
#endif
