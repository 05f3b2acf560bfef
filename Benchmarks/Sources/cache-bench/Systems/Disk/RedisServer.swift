import Foundation

/// A `redis-server` process of the harness's own: loopback TCP on a free port and a Unix domain
/// socket in a private temporary directory, persistence off (no RDB snapshots, no append-only
/// file), stopped by ``stop()``. Shared as a handle: only the thread that started it stops it.
final class RedisServer: @unchecked Sendable {
    /// Where to get it when `redis-server` is not on the PATH.
    static let installHint = "install it with: sudo apt-get install -y redis-server"

    let port: UInt16
    /// The Unix domain socket it also listens on (mode 700, in a directory only this user can
    /// enter), removed with its directory by ``stop()``.
    let unixSocketPath: String
    /// The temporary directory holding the socket.
    private let socketDirectory: String
    private var process: Process
    private let executable: String

    /// The executable's path, or nil when it is not installed.
    static func executable() -> String? {
        let paths =
            (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            + ["/usr/sbin", "/usr/bin"]
        return paths.map { "\($0)/redis-server" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts the server and waits (up to 10 s) until it answers PING on TCP, then checks that it
    /// answers on the socket too.
    init(executable: String) throws {
        port = try Self.freeLoopbackPort()
        socketDirectory = try Self.privateDirectory()
        unixSocketPath = socketDirectory + "/redis.sock"
        guard unixSocketPath.utf8.count <= RESPConnection.maximumUnixPathBytes else {
            try? FileManager.default.removeItem(atPath: socketDirectory)
            throw RedisFailure(
                description: "the socket path \(unixSocketPath) is longer than sockaddr_un holds "
                    + "(\(RESPConnection.maximumUnixPathBytes) bytes)")
        }
        self.executable = executable
        process = Process()
        do {
            try launch()
        } catch {
            try? FileManager.default.removeItem(atPath: socketDirectory)
            throw error
        }
        // Both listeners are set up before the server answers anything.
        do {
            guard try RESPConnection(unixSocketPath: unixSocketPath).ping() else {
                throw RedisFailure(description: "redis-server did not answer PING on \(unixSocketPath)")
            }
        } catch {
            stop()
            throw error
        }
    }

    /// Starts the process and waits (up to 10 s) until it answers PING on TCP.
    private func launch() throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--port", "\(port)", "--bind", "127.0.0.1", "--unixsocket", unixSocketPath, "--unixsocketperm", "700",
            "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning", "--logfile", "",
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

    /// Sends `signal` to the server (`SIGSTOP` and `SIGCONT` for the fleet suite's faults).
    func signal(_ signal: Int32) {
        if process.isRunning { _ = Glibc.kill(process.processIdentifier, signal) }
    }

    /// Kills the server (`SIGKILL`: everything it held is lost) and waits for it to exit.
    func kill() {
        signal(SIGKILL)
        process.waitUntilExit()
    }

    /// Starts a killed server again on the same port and socket, empty.
    func restart() throws {
        guard !process.isRunning else { throw RedisFailure(description: "redis-server runs: not restarted") }
        // The killed server's socket file is still there.
        try? FileManager.default.removeItem(atPath: unixSocketPath)
        try launch()
    }

    /// Terminates the server, waits for it to exit and removes the socket's directory.
    func stop() {
        if process.isRunning {
            signal(SIGCONT)
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: socketDirectory)
    }

    /// A new directory only this user can enter (`mkdtemp`: mode 700) under the temporary
    /// directory, so no other user can reach the socket, nor put a file of theirs in its place;
    /// under /tmp when the temporary directory's path is too long for a socket path in it.
    private static func privateDirectory() throws -> String {
        var base = FileManager.default.temporaryDirectory.path
        if base.hasSuffix("/") { base.removeLast() }
        let name = "/cache-bench-redis-XXXXXX"
        if (base + name + "/redis.sock").utf8.count > RESPConnection.maximumUnixPathBytes { base = "/tmp" }
        let template = base + name
        var bytes = Array(template.utf8CString)
        let made = bytes.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
        guard let made else { throw POSIXFailure("mkdtemp \(template)") }
        return made
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
    /// Whether Redis answered with an error reply (`-OOM …`): the connection is still in step.
    var isErrorReply = false
}
