#if Redis
import Logging
import RESP
import Synchronization

/// Runs commands on a Redis Cluster: each command goes to the primary serving its key's hash
/// slot, through one executor per node (a connection pool, made by the injected factory).
///
/// - A pipeline is split by node; the per-node pipelines run concurrently and the replies are
///   put back in the order of the commands. A command without a key goes to any primary.
/// - `MOVED`: the slot's new owner is recorded, a topology refresh is started, the command is
///   sent to the new owner. `ASK`: `ASKING` and the command are sent to the named node, once,
///   the slot map unchanged. A command redirected more than ``maximumRedirections`` times fails
///   the call with `RedisClientError.clusterDown`.
/// - A node that fails starts a topology refresh from the other known nodes. When the failure
///   is a connect failure (nothing was sent), the call waits for that refresh and sends its
///   commands once more; any other failure (a timeout, a closed connection: the command may
///   have run) is thrown as it is.
/// - Refreshes (`CLUSTER SLOTS`) run one at a time, at most one per `minimumRefreshInterval`.
///   The first call loads the topology from the seed endpoints, the first that answers.
/// - No call lasts longer than its `timeout`, whatever the nodes do.
///
/// Executors are kept for every node ever used until ``close()``: a node that leaves the
/// topology costs an idle pool, and no call in flight can lose its executor under it.
final class RedisClusterClient: RedisExecutor {
    /// Makes the executor for one node; the client calls it once per endpoint.
    typealias NodeFactory = @Sendable (RedisEndpoint) -> any RedisExecutor

    /// How many times one command may be redirected (`MOVED` or `ASK`) in one call: 5.
    static let maximumRedirections = 5

    private let seeds: [RedisEndpoint]
    private let makeNode: NodeFactory
    private let minimumRefreshInterval: Duration
    private let refreshTimeout: Duration
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        /// Nil until the first refresh succeeds.
        var topology: ClusterTopology?
        var nodes: [RedisEndpoint: any RedisExecutor] = [:]
        var refresh: Task<Void, Never>?
        var lastRefreshStart: ContinuousClock.Instant?
        var refreshCount = 0
        var nextKeylessNode = 0
        var closed = false
    }

    /// Creates a client that learns the cluster's topology from `seeds` on its first call.
    ///
    /// - Parameters:
    ///   - seeds: Nodes to ask for the topology, in order, until one answers; any node of the
    ///     cluster will do.
    ///   - minimumRefreshInterval: The least time between two topology refreshes (default 250 ms).
    ///   - refreshTimeout: How long one node is given to answer `CLUSTER SLOTS` (default 1 s).
    ///   - logger: Where topology changes and refresh failures are logged, at debug level.
    ///   - makeNode: Makes the executor of a node.
    init(
        seeds: [RedisEndpoint],
        minimumRefreshInterval: Duration = .milliseconds(250),
        refreshTimeout: Duration = .seconds(1),
        logger: Logger = Logger(label: "LMDBCacheRedis.cluster"),
        makeNode: @escaping NodeFactory
    ) {
        self.seeds = seeds
        self.minimumRefreshInterval = minimumRefreshInterval
        self.refreshTimeout = refreshTimeout
        self.logger = logger
        self.makeNode = makeNode
    }

    /// The slot map as last learned (nil before the first successful refresh).
    var topology: ClusterTopology? { state.withLock { $0.topology } }

    /// How many topology refreshes have completed, successful or not.
    var refreshCount: Int { state.withLock { $0.refreshCount } }

    /// Sends `commands` to the nodes serving their keys and returns the replies in order.
    ///
    /// - Throws: `RedisClientError.timedOut` after `timeout`; `.clusterDown` when no node
    ///   answered for the topology, a key's slot is not served, or a command was redirected too
    ///   often; a node's own error when its exchange failed (its commands may have run); `.closed`
    ///   after ``close()``.
    func execute(_ commands: [RedisCommand], timeout: Duration) async throws -> [RESPValue] {
        guard !state.withLock({ $0.closed }) else { throw RedisClientError.closed }
        guard !commands.isEmpty else { return [] }
        let deadline = ContinuousClock.now.advanced(by: timeout)
        return try await raceAgainstDeadline(deadline) {
            try await self.route(commands, deadline: deadline)
        }
    }

    /// Loads the topology now (the first call would otherwise), from the seeds.
    ///
    /// - Throws: `RedisClientError.clusterDown` when no seed answered with a slot map.
    func refreshTopology() async throws {
        await requestRefresh(after: [], rateLimited: false)?.value
        guard topology != nil else { throw RedisClientError.clusterDown("no node answered CLUSTER SLOTS") }
    }

    /// Closes every node's executor; later calls throw `RedisClientError.closed`.
    /// The pools of the primaries in the topology (learning it first if need be).
    func everyPrimary() async throws -> [any RedisExecutor] {
        try await loadedTopology().primaries.compactMap { executor(for: $0) }
    }

    func close() async {
        let (nodes, refresh) = state.withLock { state in
            state.closed = true
            defer { state.nodes = [:] }
            return (Array(state.nodes.values), state.refresh)
        }
        refresh?.cancel()
        for node in nodes { await node.close() }
    }

    // MARK: - Routing

    /// One node's share of a round: the commands (by index) and whether each follows an `ASK`.
    private struct Batch {
        var endpoint: RedisEndpoint
        var indices: [Int] = []
        var asking: [Bool] = []
    }

    private func route(_ commands: [RedisCommand], deadline: ContinuousClock.Instant) async throws -> [RESPValue] {
        var topology = try await loadedTopology()
        var replies = [RESPValue?](repeating: nil, count: commands.count)
        var redirections = [Int](repeating: 0, count: commands.count)
        var askTargets: [Int: RedisEndpoint] = [:]
        var pending = Array(commands.indices)
        var retriedAfterConnectFailure = false
        var refreshedForUnservedSlot = false

        while !pending.isEmpty {
            try Task.checkCancellation()
            // Which node each pending command goes to.
            var batches: [RedisEndpoint: Batch] = [:]
            for index in pending {
                let target: RedisEndpoint
                if let ask = askTargets[index] {
                    target = ask
                } else if let key = commands[index].key {
                    let slot = HashSlot.slot(of: key)
                    guard let owner = topology.primary(forSlot: slot) else {
                        guard !refreshedForUnservedSlot else {
                            throw RedisClientError.clusterDown("slot \(slot) is not served by any node")
                        }
                        refreshedForUnservedSlot = true
                        await requestRefresh(after: [], rateLimited: true)?.value
                        topology = try await loadedTopology()
                        batches = [:]
                        break
                    }
                    target = owner
                } else {
                    target = keylessTarget(in: topology)
                }
                batches[target, default: Batch(endpoint: target)].indices.append(index)
                batches[target, default: Batch(endpoint: target)].asking.append(askTargets[index] != nil)
            }
            if batches.isEmpty { continue }

            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { throw RedisClientError.timedOut }
            let outcomes = await send(Array(batches.values), commands: commands, timeout: remaining)

            pending = []
            var failedNodes: [RedisEndpoint] = []
            var unsent: [Int] = []
            var failure: (any Error)?
            for (batch, outcome) in outcomes {
                switch outcome {
                case .failure(let error):
                    failedNodes.append(batch.endpoint)
                    if case .connectFailed = error as? RedisClientError, !retriedAfterConnectFailure {
                        unsent += batch.indices
                    } else {
                        failure = failure ?? error
                    }
                case .success(let values):
                    let expected = batch.indices.count + batch.asking.count { $0 }
                    guard values.count == expected else {
                        let reason = "\(batch.endpoint) answered \(values.count) replies to \(expected) commands"
                        failure = failure ?? RedisClientError.protocolViolation(reason)
                        continue
                    }
                    var position = 0
                    for (index, asking) in zip(batch.indices, batch.asking) {
                        if asking { position += 1 }  // ASKING's own reply.
                        let reply = values[position]
                        position += 1
                        askTargets[index] = nil
                        if RedisConnectionPool.isReadOnlyRefusal(reply) || Self.isLoading(reply) {
                            // A demoted primary the map still names, or a restarted one: learn
                            // the current map.
                            failedNodes.append(batch.endpoint)
                        }
                        guard case .error(let message) = reply,
                            let redirection = ClusterRedirection(errorMessage: message, from: batch.endpoint)
                        else {
                            replies[index] = reply
                            continue
                        }
                        redirections[index] += 1
                        guard redirections[index] <= Self.maximumRedirections else {
                            throw RedisClientError.clusterDown(
                                "a command was redirected more than \(Self.maximumRedirections) times")
                        }
                        switch redirection.kind {
                        case .moved:
                            topology.assign(slot: redirection.slot, to: redirection.endpoint)
                            recordMove(of: redirection.slot, to: redirection.endpoint)
                        case .ask:
                            askTargets[index] = redirection.endpoint
                        }
                        pending.append(index)
                    }
                }
            }
            if !failedNodes.isEmpty {
                let refresh = requestRefresh(after: failedNodes, rateLimited: true)
                if failure == nil, !unsent.isEmpty {
                    retriedAfterConnectFailure = true
                    await refresh?.value
                    topology = try await loadedTopology()
                    pending += unsent
                }
            }
            if let failure { throw failure }
            // A refresh may have landed meanwhile (the moves seen are recorded there too).
            topology = self.topology ?? topology
            pending.sort()
        }
        var ordered: [RESPValue] = []
        ordered.reserveCapacity(commands.count)
        for reply in replies {
            guard let reply else { throw RedisClientError.protocolViolation("a command got no reply") }
            ordered.append(reply)
        }
        return ordered
    }

    /// Sends each batch to its node concurrently; ASKING precedes each asked command.
    private func send(
        _ batches: [Batch],
        commands: [RedisCommand],
        timeout: Duration
    ) async -> [(Batch, Result<[RESPValue], any Error>)] {
        await withTaskGroup(of: (Batch, Result<[RESPValue], any Error>).self) { group in
            for batch in batches {
                guard let node = executor(for: batch.endpoint) else {
                    group.addTask { (batch, .failure(RedisClientError.closed)) }
                    continue
                }
                var pipeline: [RedisCommand] = []
                for (index, asking) in zip(batch.indices, batch.asking) {
                    if asking { pipeline.append(Self.asking) }
                    pipeline.append(commands[index])
                }
                group.addTask { [pipeline] in
                    do {
                        return (batch, .success(try await node.execute(pipeline, timeout: timeout)))
                    } catch {
                        return (batch, .failure(error))
                    }
                }
            }
            var outcomes: [(Batch, Result<[RESPValue], any Error>)] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
    }

    /// Whether `reply` is `-LOADING`: a node restarted and still loading its data.
    private static func isLoading(_ reply: RESPValue) -> Bool {
        guard case .error(let message) = reply else { return false }
        return message.starts(with: Array("LOADING".utf8))
    }

    private static let asking = RedisCommand([Array("ASKING".utf8)])
    private static let clusterSlots = RedisCommand([Array("CLUSTER".utf8), Array("SLOTS".utf8)])

    /// A primary for a command without a key, in turn.
    private func keylessTarget(in topology: ClusterTopology) -> RedisEndpoint {
        state.withLock { state in
            defer { state.nextKeylessNode &+= 1 }
            let primaries = topology.primaries
            return primaries[Int(UInt(bitPattern: state.nextKeylessNode) % UInt(primaries.count))]
        }
    }

    /// The executor of `endpoint`, made on first use; nil once the client is closed (so a
    /// refresh or call still running then makes no executor that nobody would close).
    private func executor(for endpoint: RedisEndpoint) -> (any RedisExecutor)? {
        state.withLock { state in
            if state.closed { return nil }
            if let node = state.nodes[endpoint] { return node }
            let node = makeNode(endpoint)
            state.nodes[endpoint] = node
            return node
        }
    }

    private func recordMove(of slot: Int, to endpoint: RedisEndpoint) {
        state.withLock { $0.topology?.assign(slot: slot, to: endpoint) }
        _ = requestRefresh(after: [], rateLimited: true)
    }

    // MARK: - Topology

    /// The topology, loading it from the seeds first if there is none yet.
    private func loadedTopology() async throws -> ClusterTopology {
        if let topology { return topology }
        await requestRefresh(after: [], rateLimited: true)?.value
        guard let topology, !topology.primaries.isEmpty else {
            throw RedisClientError.clusterDown("no node answered CLUSTER SLOTS")
        }
        return topology
    }

    /// Starts a refresh that asks the nodes in `failed` last, unless one is in flight (which is
    /// returned) or, when `rateLimited`, one started less than `minimumRefreshInterval` ago
    /// (nil). The client being closed also answers nil.
    private func requestRefresh(after failed: [RedisEndpoint], rateLimited: Bool) -> Task<Void, Never>? {
        state.withLock { state in
            if state.closed { return nil }
            if let refresh = state.refresh { return refresh }
            let now = ContinuousClock.now
            if rateLimited, let last = state.lastRefreshStart, last.duration(to: now) < minimumRefreshInterval {
                return nil
            }
            state.lastRefreshStart = now
            let known = (state.topology?.endpoints ?? []) + seeds
            var candidates: [RedisEndpoint] = []
            for endpoint in known where !failed.contains(endpoint) && !candidates.contains(endpoint) {
                candidates.append(endpoint)
            }
            for endpoint in failed where !candidates.contains(endpoint) { candidates.append(endpoint) }
            // The task's last step takes this lock, so it cannot clear `refresh` before it is set.
            let refresh = Task { await self.refresh(asking: candidates) }
            state.refresh = refresh
            return refresh
        }
    }

    /// Asks `candidates` in turn for `CLUSTER SLOTS` and installs the first non-empty answer.
    private func refresh(asking candidates: [RedisEndpoint]) async {
        var learned: ClusterTopology?
        for endpoint in candidates where !Task.isCancelled {
            do {
                guard let node = executor(for: endpoint) else { break }
                let replies = try await node.execute([Self.clusterSlots], timeout: refreshTimeout)
                guard let reply = replies.first else { continue }
                if case .error(let message) = reply {
                    let text = String(decoding: message.prefix(200), as: UTF8.self)
                    logger.debug("CLUSTER SLOTS refused", metadata: ["node": "\(endpoint)", "error": "\(text)"])
                    continue
                }
                let topology = try ClusterTopology(clusterSlots: reply, from: endpoint)
                if topology.isEmpty { continue }
                learned = topology
                break
            } catch {
                logger.debug("CLUSTER SLOTS failed", metadata: ["node": "\(endpoint)", "error": "\(error)"])
            }
        }
        state.withLock { state in
            state.refresh = nil
            state.refreshCount += 1
            if let learned, learned != state.topology {
                state.topology = learned
            }
        }
        if learned == nil {
            logger.debug("Topology refresh found no node answering", metadata: ["asked": "\(candidates.count)"])
        }
    }
}
#endif
