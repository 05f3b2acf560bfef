#if Redis
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP proxy in front of `127.0.0.1:upstreamPort` that injects the faults a network
/// between a machine and Redis shows, for the fault harness (issue 32): the stalling proxy's black
/// hole, plus delayed replies, lost replies, a bandwidth cap and connection resets.
///
/// One thread accepts; two threads per connection copy bytes, each applying the fault in force
/// when it has bytes to pass. Faults apply to connections open and new alike. Descriptors are
/// closed once, under the lock every shutdown takes (a late shutdown would cut another test's
/// socket that reused the number).
final class FaultProxy: @unchecked Sendable {
    /// What the proxy does to the bytes it carries.
    enum Fault: Sendable, Equatable, CustomStringConvertible {
        /// Forwards both ways.
        case none
        /// Passes nothing either way (closes included) until the fault changes; then delivers
        /// what it held: a partition that heals.
        case blackHole
        /// Forwards replies (upstream to client) `by` late: a slow link or a paused server.
        case delayReplies(by: Duration)
        /// Discards replies: requests reach Redis and run, their answers never arrive (the client
        /// times out not knowing whether its write landed). A connection that lost a reply is out
        /// of step with its client, as a TCP connection never is: when the fault ends, every
        /// connection is reset (what a real link that lost replies comes to).
        case dropReplies
        /// Forwards at most `bytesPerSecond` each way: a slow link.
        case bandwidth(bytesPerSecond: Int)

        var description: String {
            switch self {
            case .none: return "none"
            case .blackHole: return "black hole"
            case .delayReplies(let by): return "replies delayed \(by)"
            case .dropReplies: return "replies dropped"
            case .bandwidth(let rate): return "bandwidth \(rate) B/s"
            }
        }
    }

    /// The port clients connect to, on 127.0.0.1.
    let port: Int
    let upstreamPort: Int

    private let listener: Int32
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var fault = Fault.none
    private var stopped = false
    private var listenerClosed = false
    private var descriptors: Set<Int32> = []

    /// Starts a proxy to `upstreamPort` on a free port.
    init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        (listener, port) = try LoopbackSocket.listen()
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { stop() }

    /// The fault in force from now on (bytes held by a black hole are delivered when it ends).
    var current: Fault {
        get { condition.withLock { fault } }
        set {
            let wasDropping = condition.withLock {
                let old = fault
                fault = newValue
                condition.broadcast()
                return old == .dropReplies
            }
            if wasDropping && newValue != .dropReplies { resetConnections() }
        }
    }

    /// Resets every open connection (RST: SO_LINGER 0): a connection the network dropped, or a
    /// server that restarted.
    func resetConnections() {
        condition.withLock {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            for descriptor in descriptors {
                setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                shutdown(descriptor, Int32(SHUT_RDWR))
            }
        }
    }

    /// Closes the listener and every connection, once.
    func stop() {
        condition.withLock {
            guard !stopped else { return }
            stopped = true
            condition.broadcast()
            if !listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
            for descriptor in descriptors { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        defer {
            condition.withLock {
                listenerClosed = true
                close(listener)
            }
        }
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            guard let server = try? LoopbackSocket.connect(port: upstreamPort) else {
                close(client)
                continue
            }
            let registered = condition.withLock {
                guard !stopped else { return false }
                descriptors.formUnion([client, server])
                return true
            }
            guard registered else {
                close(client)
                close(server)
                return
            }
            let connection = Connection()
            Thread.detachNewThread { [self] in pump(from: client, to: server, replies: false, connection) }
            Thread.detachNewThread { [self] in pump(from: server, to: client, replies: true, connection) }
        }
    }

    /// Copies `source` to `destination` under the fault in force for each chunk.
    private func pump(from source: Int32, to destination: Int32, replies: Bool, _ connection: Connection) {
        while true {
            let bytes = LoopbackSocket.read(source, limit: 4_096)
            guard let fault = waitWhileBlackHoled() else { break }
            if bytes.isEmpty { break }
            switch fault {
            case .none, .blackHole:
                if !LoopbackSocket.write(destination, bytes) { return finish(source, destination, connection) }
            case .delayReplies(let delay):
                if replies { Thread.sleep(forTimeInterval: delay.seconds) }
                if !LoopbackSocket.write(destination, bytes) { return finish(source, destination, connection) }
            case .dropReplies:
                if !replies, !LoopbackSocket.write(destination, bytes) { return finish(source, destination, connection) }
            case .bandwidth(let rate):
                // Chunks of a tenth of a second's worth, each after its share of time.
                let chunk = max(1, rate / 10)
                var offset = 0
                while offset < bytes.count {
                    let end = min(bytes.count, offset + chunk)
                    Thread.sleep(forTimeInterval: Double(end - offset) / Double(max(1, rate)))
                    if !LoopbackSocket.write(destination, Array(bytes[offset..<end])) {
                        return finish(source, destination, connection)
                    }
                    offset = end
                }
            }
        }
        finish(source, destination, connection)
    }

    /// Waits while the fault is a black hole; the fault then in force, or nil once stopped.
    private func waitWhileBlackHoled() -> Fault? {
        condition.withLock {
            while fault == .blackHole && !stopped { condition.wait() }
            return stopped ? nil : fault
        }
    }

    private func finish(_ source: Int32, _ destination: Int32, _ connection: Connection) {
        condition.withLock {
            shutdown(destination, Int32(SHUT_WR))
            shutdown(source, Int32(SHUT_RD))
            if connection.finishOneDirection() {
                descriptors.subtract([source, destination])
                close(source)
                close(destination)
            }
        }
    }

    /// One proxied connection: its sockets are closed when both directions have ended.
    private final class Connection: @unchecked Sendable {
        private var ended = 0
        /// True for the second direction to end (called under the proxy's lock).
        func finishOneDirection() -> Bool {
            ended += 1
            return ended == 2
        }
    }
}

extension Duration {
    /// Seconds as a Double (for Thread.sleep).
    fileprivate var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
#endif
