#if Redis
import Foundation
import Synchronization
import Testing

@testable import LMDBCacheRedis

#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` for tests, on a free loopback port, without persistence, in a temporary
/// directory; optionally with a password (and an ACL user) and TLS with certificates made by the
/// `openssl` command.
///
/// The fixture checks the server with `redis-cli` processes, so the client under test is never
/// the judge of its own results. Waits poll until a generous deadline; none is a fixed sleep.
final class RedisServer: Sendable {
    /// The certificates of a TLS server: a CA, the server's certificate (for `localhost` and
    /// 127.0.0.1) and key, and another CA that signed nothing of this server's.
    struct TLSFiles: Sendable {
        var caCertificate: String
        var serverCertificate: String
        var serverKey: String
        var otherCACertificate: String
    }

    /// An error of the fixture: what it was running or waiting for.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The port the server listens on (TLS only, when TLS is on).
    let port: Int
    /// The `default` user's password, if any.
    let password: String?
    /// An ACL user created at start with `password` and every permission, if any.
    let username: String?
    /// The certificates, when TLS is on.
    let tlsFiles: TLSFiles?
    /// The server's working directory (its log is `redis.log` there).
    let directory: URL
    private let process: Mutex<Subprocess?>

    /// Where the client reaches the server.
    var endpoint: RedisEndpoint { RedisEndpoint(host: "127.0.0.1", port: port) }

    /// Starts a server and returns once it answers `PING`.
    ///
    /// - Parameters:
    ///   - password: `requirepass` (the `default` user's password); default none.
    ///   - username: an ACL user to create with `password` (which must then be given); default none.
    ///   - tls: serve TLS only, with a CA and certificate made for the occasion; default off.
    init(password: String? = nil, username: String? = nil, tls: Bool = false) async throws {
        precondition(username == nil || password != nil, "an ACL user needs a password")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("redis-server-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        port = try LoopbackSocket.freePorts(1)[0]
        self.password = password
        self.username = username
        tlsFiles = tls ? try Self.makeCertificates(in: directory) : nil
        process = Mutex(nil)
        try await start()
        if let username, let password {
            let reply = try cli(["ACL", "SETUSER", username, "on", ">\(password)", "~*", "&*", "+@all"])
            guard reply.trimmingCharacters(in: .whitespacesAndNewlines) == "OK" else {
                throw Failure(description: "ACL SETUSER answered \(reply)")
            }
        }
    }

    deinit { stop() }

    /// Starts the process (again) on the same port and waits until it answers `PING`.
    private func start(_ extra: [String] = []) async throws {
        var arguments = extra + [
            "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory.path,
            "--logfile", directory.appendingPathComponent("redis.log").path,
        ]
        if let tlsFiles {
            arguments += [
                "--port", "0", "--tls-port", "\(port)", "--tls-cert-file", tlsFiles.serverCertificate,
                "--tls-key-file", tlsFiles.serverKey, "--tls-ca-cert-file", tlsFiles.caCertificate,
                "--tls-auth-clients", "no",
            ]
        } else {
            arguments += ["--port", "\(port)"]
        }
        if let password { arguments += ["--requirepass", password] }
        let process = try Subprocess.start("/usr/bin/redis-server", arguments)
        self.process.withLock { $0 = process }
        let deadline = ContinuousClock.now + hangBound
        while ContinuousClock.now < deadline {
            guard process.isRunning else { throw Failure(description: "redis-server exited: \(log())") }
            // Answered by this server, not another test's on the same port.
            // (Lines end in CR LF, one Character to String: compared line by line.)
            if let info = try? cli(["INFO", "server"]),
                info.split(whereSeparator: \.isNewline).contains(where: {
                    $0.trimmingCharacters(in: .whitespaces) == "process_id:\(process.pid)"
                })
            {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Failure(description: "hung: redis-server did not answer within \(hangBound): \(log())")
    }

    /// Whether the server's process runs (a stopped one does).
    var isRunning: Bool { process.withLock { $0 }?.isRunning == true }

    /// Kills the server with SIGKILL and waits until it has exited.
    func kill() {
        guard let process = process.withLock({ $0 }) else { return }
        process.signal(SIGKILL)
        process.wait()
    }

    /// Starts the server again on the same port (killing it first if it runs), with no data.
    func restart() async throws {
        kill()
        // Saved by restartLoading(filler:): not this restart's.
        try? FileManager.default.removeItem(at: directory.appendingPathComponent("dump.rdb"))
        try await start()
    }

    /// Restarts the server cleanly (`SHUTDOWN SAVE`: nothing written is lost) with `filler` more
    /// keys of 1 KB (`filler:N`), loaded slowly: until ``finishLoading()`` it answers every
    /// command that needs its data with `-LOADING` (about 50 ms per key, and between keys only:
    /// each answer may wait that long).
    func restartLoading(filler: Int = 4_000) async throws {
        try shutDownSaving(filler: filler)
        try await startLoading()
    }

    /// ``restartLoading(filler:)``'s first half, which blocks its thread: the filler, then
    /// `SHUTDOWN SAVE`, returning once the process has exited.
    func shutDownSaving(filler: Int = 4_000) throws {
        try cli(["CONFIG", "SET", "rdbcompression", "no"])
        try cli(["EVAL", "for i = 1, \(filler) do redis.call('SET', 'filler:' .. i, string.rep('x', 1024)) end", "0"])
        // redis-cli reports the connection the server closed as it exits.
        _ = try? cli(["SHUTDOWN", "SAVE"])
        guard let process = process.withLock({ $0 }) else { return }
        let deadline = ContinuousClock.now + hangBound
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                kill()
                throw Failure(description: "hung: redis-server did not exit after SHUTDOWN SAVE within \(hangBound): \(log())")
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        _ = process.wait()
    }

    /// ``restartLoading(filler:)``'s second half: starts the server loading its data slowly.
    func startLoading() async throws {
        try await start(["--key-load-delay", "50000", "--loading-process-events-interval-bytes", "1024"])
    }

    /// Whether the server is still loading its data.
    func isLoading() throws -> Bool {
        try cli(["INFO", "persistence"]).split(whereSeparator: \.isNewline).contains {
            $0.trimmingCharacters(in: .whitespaces) == "loading:1"
        }
    }

    /// Lets a server ``restartLoading(filler:)`` made finish loading at full speed, and waits
    /// until it has.
    func finishLoading() async throws {
        try cli(["CONFIG", "SET", "key-load-delay", "0"])
        _ = await waitFor("redis-server finished loading its data") { (try? self.isLoading()) == false }
    }

    /// Stops the server (SIGSTOP): connections stay open and nothing is answered.
    func pause() {
        process.withLock { $0 }?.signal(SIGSTOP)
    }

    /// Lets a paused server run again (SIGCONT).
    func resume() {
        process.withLock { $0 }?.signal(SIGCONT)
    }

    /// Kills the server and removes its directory.
    func stop() {
        resume()
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `redis-cli` with this server's address, TLS and credentials and `arguments`; its output.
    @discardableResult
    func cli(_ arguments: [String]) throws -> String {
        var prefix = ["-h", "127.0.0.1", "-p", "\(port)", "--no-auth-warning"]
        if let tlsFiles { prefix += ["--tls", "--cacert", tlsFiles.caCertificate] }
        if let password { prefix += ["-a", password] }
        return try Self.run("/usr/bin/redis-cli", prefix + arguments)
    }

    /// The server's log, for failure messages.
    func log() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("redis.log"), encoding: .utf8)) ?? "(no log)"
    }

    /// A port free on 127.0.0.1 now: bound to port 0, read, closed.

    /// A CA, a server certificate it signs (for `localhost` and 127.0.0.1), and a second CA.
    private static func makeCertificates(in directory: URL) throws -> TLSFiles {
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for name in ["ca", "other-ca"] {
            try run(
                "/usr/bin/openssl",
                ["req", "-x509", "-new"] + key + [
                    "-keyout", path("\(name).key"), "-out", path("\(name).crt"), "-days", "2", "-subj",
                    "/CN=LMDBCache test \(name)", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                ])
        }
        try run(
            "/usr/bin/openssl",
            ["req", "-new"] + key + [
                "-keyout", path("server.key"), "-out", path("server.csr"), "-subj", "/CN=localhost",
            ])
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n".write(
            toFile: path("server.ext"), atomically: true, encoding: .utf8)
        try run(
            "/usr/bin/openssl",
            [
                "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-out", path("server.crt"), "-days", "2", "-extfile", path("server.ext"),
            ])
        return TLSFiles(
            caCertificate: path("ca.crt"), serverCertificate: path("server.crt"), serverKey: path("server.key"),
            otherCACertificate: path("other-ca.crt"))
    }

    /// Runs a program to its end; its standard output, or a failure with its error output.
    @discardableResult
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let (status, output) = try Subprocess.run(executable, arguments)
        guard status == 0 else {
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) failed: \(output)")
        }
        return output
    }
}
#endif
