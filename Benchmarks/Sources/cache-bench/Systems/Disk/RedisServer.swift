import Foundation

/// A `redis-server` process of the harness's own: loopback only, on a free port, persistence off
/// (no RDB snapshots, no append-only file), stopped by ``stop()``. Shared as a handle: only the
/// thread that started it stops it.
final class RedisServer: @unchecked Sendable {
    /// Where to get it when `redis-server` is not on the PATH.
    static let installHint = "install it with: sudo apt-get install -y redis-server"

    let port: UInt16
    private let process: Process

    /// The executable's path, or nil when it is not installed.
    static func executable() -> String? {
        let paths =
            (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            + ["/usr/sbin", "/usr/bin"]
        return paths.map { "\($0)/redis-server" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts the server and waits (up to 10 s) until it answers PING.
    init(executable: String) throws {
        port = try Self.freeLoopbackPort()
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--loglevel", "warning", "--logfile", "",
        ]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while true {
            if let connection = try? RESPConnection(port: port), (try? connection.ping()) == true { break }
            guard process.isRunning, Date() < deadline else {
                stop()
                throw RedisFailure(description: "redis-server did not answer on 127.0.0.1:\(port)")
            }
            usleep(20_000)
        }
    }

    /// Terminates the server and waits for it to exit.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// A TCP port nobody listens on now: bind port 0 on loopback, read what the kernel gave, close.
    private static func freeLoopbackPort() throws -> UInt16 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXFailure("socket") }
        defer { _ = Glibc.close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard bound else { throw POSIXFailure("bind 127.0.0.1:0") }
        return UInt16(bigEndian: address.sin_port)
    }
}

/// A Redis error reply or protocol failure.
struct RedisFailure: Error, CustomStringConvertible {
    let description: String
}
