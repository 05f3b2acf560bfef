#if Redis
import Foundation
import Glibc
import Synchronization

/// A child process started with `posix_spawn`, for the Redis fixtures (`redis-server`,
/// `redis-cli`, `openssl`).
///
/// Not Foundation's `Process`: on Linux its one monitoring thread reaps children with a blocking
/// `waitpid`, and with fixtures starting servers and clients from parallel tests it was seen
/// blocked on a live `redis-server` while every other `waitUntilExit` waited on it: the whole
/// test run stalled. Here each child is reaped by whoever waits for it, and the pipes are
/// close-on-exec.
final class Subprocess: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let pid: pid_t
    private let status = Mutex<Int32?>(nil)

    private init(pid: pid_t) {
        self.pid = pid
    }

    /// Starts `executable` with `arguments`, its standard output and error sent to `output`
    /// (a file descriptor; default /dev/null), its standard input from /dev/null.
    static func start(_ executable: String, _ arguments: [String], output: Int32? = nil) throws -> Subprocess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let output {
            posix_spawn_file_actions_adddup2(&actions, output, 1)
            posix_spawn_file_actions_adddup2(&actions, output, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard result == 0 else {
            throw Failure(description: "cannot start \(executable): \(String(cString: strerror(result)))")
        }
        return Subprocess(pid: pid)
    }

    /// Runs `executable` to its end; its exit status and what it wrote (standard output and
    /// error together).
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        var fds: [Int32] = [0, 0]
        // pipe2 is not in Swift's Glibc module: close-on-exec is set right after (a child spawned
        // by another thread in between may inherit the pipe, and only delays this one's EOF).
        guard pipe(&fds) == 0 else { throw Failure(description: "pipe failed") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let child: Subprocess
        do {
            child = try start(executable, arguments, output: fds[1])
        } catch {
            close(fds[0])
            close(fds[1])
            throw error
        }
        close(fds[1])
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if count > 0 {
                output += buffer[0..<count]
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        close(fds[0])
        return (child.wait(), String(decoding: output, as: UTF8.self))
    }

    /// Whether it has not exited yet (reaping it if it has).
    var isRunning: Bool {
        status.withLock { status in
            guard status == nil else { return false }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return true }
            status = raw
            return false
        }
    }

    /// Sends `signal`, unless it has been reaped (its pid may be another process's by then).
    func signal(_ signal: Int32) {
        status.withLock { status in
            if status == nil { _ = kill(pid, signal) }
        }
    }

    /// Waits for it to exit; its exit status (128 + the signal for one killed by a signal).
    @discardableResult
    func wait() -> Int32 {
        status.withLock { status in
            if status == nil {
                var raw: Int32 = 0
                while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
                status = raw
            }
            let raw = status ?? 0
            let signal = raw & 0x7F
            return signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
        }
    }
}
#endif
