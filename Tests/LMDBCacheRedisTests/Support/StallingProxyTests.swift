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

        func stop() {
            shutdown(listener, Int32(SHUT_RDWR))
            close(listener)
        }
    }

    /// Reads exactly `count` bytes, or fewer if the stream ends (a generous bound on a hang:
    /// SO_RCVTIMEO of 30 s).
    private func read(_ descriptor: Int32, count: Int) -> [UInt8] {
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var bytes: [UInt8] = []
        while bytes.count < count {
            let chunk = LoopbackSocket.read(descriptor, limit: count - bytes.count)
            if chunk.isEmpty { break }
            bytes += chunk
        }
        return bytes
    }

    @Test func forwardsThenBlackHolesThenDeliversHeldBytes() throws {
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
        // Nothing comes back, and nothing reached the server (checked over a window: the bytes
        // cannot be on their way, they are held by the proxy's threads).
        #expect(!LoopbackSocket.isReadable(first, withinMilliseconds: 300))
        #expect(!LoopbackSocket.isReadable(second, withinMilliseconds: 50))
        #expect(echo.receivedCount == 4)

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
