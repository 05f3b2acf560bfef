import Foundation

/// A progress bar on standard error for long operations: done and total, rate and estimated time
/// left, redrawn at most ten times a second. Silent unless standard error is a terminal and the
/// user did not ask for `--quiet`.
public final class ProgressBar: @unchecked Sendable {
    private let label: String
    private var total: Int
    private let enabled: Bool
    /// True when the bar is drawn.
    public var isShown: Bool { enabled }
    private let start = ContinuousClock.now
    private var lastDrawn: ContinuousClock.Instant?
    private let lock = NSLock()

    /// A bar for `total` units of `label` work; drawn only when `enabled` and stderr is a terminal.
    public init(_ label: String, total: Int, quiet: Bool) {
        self.label = label
        self.total = max(total, 0)
        enabled = !quiet && isatty(STDERR_FILENO) == 1
    }

    /// Shows `done` of the total (the total grows if `done` passes it).
    public func update(_ done: Int) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        let now = ContinuousClock.now
        if let lastDrawn, now - lastDrawn < .milliseconds(100) { return }
        lastDrawn = now
        total = max(total, done)
        FileHandle.standardError.write(
            Data(("\r" + Self.line(label, done: done, total: total, elapsed: now - start)).utf8))
    }

    /// Clears the bar.
    public func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1b}[K".utf8))
    }

    /// The bar's text: `label [#####     ] 50% 500/1000 1234/s 0:03 left`.
    public static func line(_ label: String, done: Int, total: Int, elapsed: Duration) -> String {
        let width = 24
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 0
        let filled = Int(fraction * Double(width))
        let seconds = elapsed.timeInterval
        let rate = seconds > 0 ? Double(done) / seconds : 0
        var text = "\(label) [" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        text += "] \(Int(fraction * 100))% \(done)/\(total)"
        if rate > 0 {
            text += " \(Int(rate))/s"
            let left = Int((Double(total - done) / rate).rounded(.up))
            text += " " + String(format: "%d:%02d", left / 60, left % 60) + " left"
        }
        return text
    }
}
