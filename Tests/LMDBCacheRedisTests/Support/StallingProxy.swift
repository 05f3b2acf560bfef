#if Redis
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP proxy in front of `127.0.0.1:upstreamPort`, for tests of a network that
/// black-holes traffic.
///
/// It forwards both ways until ``stall()``; then it still accepts connections (and connects them
/// upstream) but passes nothing in either direction, not even a close, as a network that drops
/// every packet. ``resume()`` delivers what was held back and forwards again. One thread accepts;
/// two threads per connection copy bytes.
final class StallingProxy: @unchecked Sendable {
    /// The port clients connect to, on 127.0.0.1.
    let port: Int
    let upstreamPort: Int

    private let listener: Int32
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var stalled = false
    private var stopped = false
    private var descriptors: Set<Int32> = []
    private var held = 0
    private var listenerClosed = false

    /// Starts a proxy to `upstreamPort` on a free port.
    init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        (listener, port) = try LoopbackSocket.listen()
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { stop() }

    /// Stops forwarding: bytes and closes are held until ``resume()``.
    func stall() {
        condition.withLock { stalled = true }
    }

    /// Forwards again, first what was held back.
    func resume() {
        condition.withLock {
            stalled = false
            condition.broadcast()
        }
    }

    /// The bytes read while stalled and held back (not forwarded) until ``resume()``: what a
    /// test waits for to know the proxy has them, rather than watching a window of time.
    var heldBytes: Int { condition.withLock { held } }

    /// Closes the listener and every connection. Once only, and under the lock that closing a
    /// descriptor takes too: a descriptor closed here or by a pump may be reused at once by
    /// another test's socket, which a late shutdown would cut (the deinit calls this again).
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
            let connection = Connection(client: client, server: server)
            Thread.detachNewThread { [self] in pump(from: client, to: server, connection) }
            Thread.detachNewThread { [self] in pump(from: server, to: client, connection) }
        }
    }

    /// Copies `source` to `destination`, waiting out stalls before each write and before passing
    /// on the end of the stream.
    private func pump(from source: Int32, to destination: Int32, _ connection: Connection) {
        while true {
            let bytes = LoopbackSocket.read(source)
            guard waitWhileStalled(holding: bytes.count) else { break }
            if bytes.isEmpty || !LoopbackSocket.write(destination, bytes) { break }
        }
        shutdown(destination, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
        if connection.finishOneDirection() {
            condition.withLock {
                descriptors.subtract([source, destination])
                close(source)
                close(destination)
            }
        }
    }

    /// Waits until not stalled, counting `count` bytes as held meanwhile; false when the proxy
    /// was stopped meanwhile.
    private func waitWhileStalled(holding count: Int) -> Bool {
        condition.withLock {
            guard stalled && !stopped else { return !stopped }
            held += count
            while stalled && !stopped { condition.wait() }
            held -= count
            return !stopped
        }
    }

    /// One proxied connection: its two sockets are closed when both directions have ended.
    private final class Connection: @unchecked Sendable {
        let client: Int32
        let server: Int32
        private let lock = NSLock()
        private var ended = 0

        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }

        /// True for the second direction to end.
        func finishOneDirection() -> Bool {
            lock.withLock {
                ended += 1
                return ended == 2
            }
        }
    }
}
#endif
