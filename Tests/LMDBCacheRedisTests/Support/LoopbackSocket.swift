#if Redis
import Foundation

#if canImport(Glibc)
import Glibc
import Synchronization
#endif

/// Blocking IPv4 loopback sockets for the test fixtures (the proxy, free ports), on plain POSIX
/// calls so that a fixture does not share an event loop with the client under test.
enum LoopbackSocket {
    /// An error of a socket call: the call's name and `errno`.
    struct Failure: Error, CustomStringConvertible {
        var call: String
        var code: Int32
        var description: String { "\(call): \(String(cString: strerror(code)))" }
    }

    /// A socket listening on 127.0.0.1 at `port` (0: a free port the kernel picks), and its port.
    static func listen(port: Int = 0) throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(call: "socket", code: errno) }
        var reuse: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(descriptor, 64) == 0 else {
            let code = errno
            close(descriptor)
            throw Failure(call: "bind/listen", code: code)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, Int(UInt16(bigEndian: actual.sin_port)))
    }

    /// `count` distinct ports free on 127.0.0.1 now (each was bound, then released; a process
    /// started right after can bind it).
    static func freePorts(_ count: Int) throws -> [Int] {
        var held: [(descriptor: Int32, port: Int)] = []
        defer { for socket in held { close(socket.descriptor) } }
        var ports: [Int] = []
        // The kernel may hand a port out again once its socket is closed; tests running in
        // parallel would then start two servers on one port (the second one's PING answered by
        // the first). Each port is handed out once per test process.
        while ports.count < count {
            let socket = try listen()
            held.append(socket)
            if handedOut.withLock({ $0.insert(socket.port).inserted }) { ports.append(socket.port) }
        }
        return ports
    }

    /// Every port ``freePorts(_:)`` handed out in this process.
    private static let handedOut = Mutex<Set<Int>>([])

    /// A socket connected to 127.0.0.1:`port`.
    static func connect(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(call: "socket", code: errno) }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(descriptor)
            throw Failure(call: "connect to \(port)", code: code)
        }
        return descriptor
    }

    /// Writes all of `bytes`; false when the peer is gone (no SIGPIPE: MSG_NOSIGNAL).
    @discardableResult
    static func write(_ descriptor: Int32, _ bytes: some Collection<UInt8>) -> Bool {
        let bytes = Array(bytes)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// Up to `limit` bytes as they arrive; empty at end of stream or on an error.
    static func read(_ descriptor: Int32, limit: Int = 16_384) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: limit)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            return count > 0 ? Array(buffer[..<count]) : []
        }
    }

    /// Whether bytes (or the end of the stream) can be read within `milliseconds`.
    static func isReadable(_ descriptor: Int32, withinMilliseconds milliseconds: Int32) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, milliseconds) > 0
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        return address
    }
}
#endif
