#if Redis
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The stalling proxy in front of an echo server: bytes pass until it stalls, none pass while
/// it is stalled (new connections included), and the held bytes arrive once it resumes.
@Suite struct StallingProxyTests {
    /// Echoes what each connection sends and counts the bytes it received.
    final class EchoServer: Sendable {
        let port: Int
        private let listener: Int32
        private let received = Mutex(0)

        init() throws {
            (listener, port) = try LoopbackSocket.listen()
            Thread.detachNewThread { [self] in
                // The listener is closed here, after the last accept: closed by stop() while this
                // loop was between two accepts, its number could be another test's socket by then.
                defer { close(listener) }
                while case let connection = accept(listener, nil, nil), connection >= 0 {
                    Thread.detachNewThread { [self] in
                        while case let bytes = LoopbackSocket.read(connection), !bytes.isEmpty {
                            received.withLock { $0 += bytes.count }
                            LoopbackSocket.write(connection, bytes)
                        }
                        close(connection)
                    }
                }
            }
        }

        var receivedCount: Int { received.withLock { $0 } }

        /// Ends the accept loop (which then closes the listener).
        func stop() {
            shutdown(listener, Int32(SHUT_RDWR))
        }
    }

    /// Reads exactly `count` bytes, or fewer if the stream ends or it hangs (no byte for
    /// ``hangBound``: SO_RCVTIMEO).
    private func read(_ descriptor: Int32, count: Int) -> [UInt8] {
        var timeout = timeval(tv_sec: Int(hangBound.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var bytes: [UInt8] = []
        while bytes.count < count {
            let chunk = LoopbackSocket.read(descriptor, limit: count - bytes.count)
            if chunk.isEmpty { break }
            bytes += chunk
        }
        return bytes
    }

    @Test func forwardsThenBlackHolesThenDeliversHeldBytes() async throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try StallingProxy(upstreamPort: echo.port)
        defer { proxy.stop() }

        let first = try LoopbackSocket.connect(port: proxy.port)
        defer { close(first) }
        LoopbackSocket.write(first, Array("ping".utf8))
        #expect(read(first, count: 4) == Array("ping".utf8))

        proxy.stall()
        LoopbackSocket.write(first, Array("held".utf8))
        // A connection made during the stall is accepted, and its bytes are held too.
        let second = try LoopbackSocket.connect(port: proxy.port)
        defer { close(second) }
        LoopbackSocket.write(second, Array("late".utf8))
        // Once the proxy holds both writes, they cannot be on their way (it forwards only after
        // a stall): nothing reached the server, so nothing can come back. Checked at that event,
        // not over a window of time.
        await waitFor("the proxy held both writes") { proxy.heldBytes == 8 }
        #expect(echo.receivedCount == 4)
        #expect(!LoopbackSocket.isReadable(first, withinMilliseconds: 0))
        #expect(!LoopbackSocket.isReadable(second, withinMilliseconds: 0))

        proxy.resume()
        #expect(read(first, count: 4) == Array("held".utf8))
        #expect(read(second, count: 4) == Array("late".utf8))
        #expect(echo.receivedCount == 12)
    }

    @Test func stopClosesConnections() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let proxy = try StallingProxy(upstreamPort: echo.port)
        let client = try LoopbackSocket.connect(port: proxy.port)
        defer { close(client) }
        LoopbackSocket.write(client, Array("x".utf8))
        #expect(read(client, count: 1) == Array("x".utf8))
        proxy.stop()
        #expect(read(client, count: 1).isEmpty)
    }
}
#endif
