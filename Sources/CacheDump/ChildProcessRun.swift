import Foundation
import Glibc

/// The forwarded-to child's process id, read by the signal handler (set once, before any handler
/// is installed).
nonisolated(unsafe) private var runningChild: pid_t = 0

/// Runs `cache-dump`'s command in a child process of itself, so that a fault inside LMDB while it
/// reads a damaged store's pages becomes a one-line report and exit status 4 rather than the
/// tool's own death by a signal.
///
/// LMDB (0.9.24) neither checksums its pages nor bounds-checks the page numbers in them: a
/// damaged branch page, or a data file cut short (read-only opens do not extend it), can send a
/// read outside the map (SIGSEGV) or past the end of the file (SIGBUS). A signal handler cannot
/// safely resume after that, and the tool a user runs to diagnose damage must not die of it; a
/// separate process contains the fault. The child is the same executable, run again with the same
/// arguments and standard streams, and an environment variable that tells it to run the command.
public enum ChildProcessRun {
    /// Set in the child's environment: it runs the command itself.
    static let marker = "CACHE_DUMP_RUNNING_COMMAND"

    /// In the child (`marker` set), or where no child can be started, calls `command`. Otherwise
    /// starts the child, waits for it and exits as it did, except that a child killed by SIGSEGV
    /// or SIGBUS is reported as a damaged store (exit 4).
    public static func run(_ command: () -> Void) -> Never {
        if getenv(marker) != nil {
            command()
            exit(0)
        }
        guard let child = spawnSelf() else {
            // No child (an unusual sandbox): run unprotected rather than not at all.
            command()
            exit(0)
        }
        runningChild = child
        // Forwarded, so stopping the tool stops its command too; the child's own end decides how
        // the tool ends.
        for signalNumber in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
            signal(signalNumber) { received in
                if runningChild > 0 { kill(runningChild, received) }
            }
        }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 {
            guard errno == EINTR else {
                FileHandle.standardError.write(
                    Data("cache-dump: lost its command's process: \(String(cString: strerror(errno)))\n".utf8))
                exit(ExitStatus.failure.rawValue)
            }
        }
        let terminatingSignal = status & 0x7f
        if terminatingSignal == 0 { exit((status >> 8) & 0xff) }
        if let reason = damageReason(terminatingSignal) {
            FileHandle.standardError.write(Data("cache-dump: damaged store: \(reason)\n".utf8))
            exit(ExitStatus.damaged.rawValue)
        }
        // Any other signal (a forwarded SIGINT, a Swift trap): end the same way.
        signal(terminatingSignal, SIG_DFL)
        var only = sigset_t()
        sigemptyset(&only)
        sigaddset(&only, terminatingSignal)
        sigprocmask(SIG_UNBLOCK, &only, nil)
        kill(getpid(), terminatingSignal)
        exit(128 + terminatingSignal)
    }

    /// What a child's death by `signalNumber` says about the store, or nil when it says nothing.
    ///
    /// SIGSEGV and SIGBUS: LMDB followed a damaged page outside the map or past the end of the
    /// file. SIGABRT: LMDB's own assertions (`mdb_assert`) and glibc's heap checks abort when
    /// LMDB works on inconsistent pages (writing commands copy and free them). A Swift trap is
    /// SIGILL or SIGTRAP, a bug of the tool rather than damage, and is not reported as damage.
    static func damageReason(_ signalNumber: Int32) -> String? {
        switch signalNumber {
        case SIGSEGV: return "LMDB faulted reading its pages (SIGSEGV)"
        case SIGBUS: return "LMDB faulted reading its pages (SIGBUS)"
        case SIGABRT: return "LMDB aborted on inconsistent pages (SIGABRT)"
        default: return nil
        }
    }

    /// Starts `/proc/self/exe` with this process's arguments, streams and environment, plus
    /// `marker`, and the Swift runtime's crash backtrace turned off (the parent reports a fault
    /// in one line). Nil when it cannot be started.
    private static func spawnSelf() -> pid_t? {
        var environment = ProcessInfo.processInfo.environment
        environment[marker] = "1"
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let arguments = CommandLine.arguments.map { strdup($0) } + [nil]
        let variables = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in arguments + variables { free(pointer) }
        }
        var child: pid_t = 0
        let code = posix_spawn(&child, "/proc/self/exe", nil, nil, arguments, variables)
        return code == 0 ? child : nil
    }
}
