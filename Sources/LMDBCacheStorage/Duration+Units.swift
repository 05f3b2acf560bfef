// The units a Duration is converted to, in one place (here, at the bottom, so Storage and the
// library share them): milliseconds for the store, nanoseconds
// for timers and metrics, seconds for Foundation and Dispatch.
extension Duration {
    /// Whole milliseconds, rounded down; negative durations count as zero, and durations past
    /// `UInt64.max` milliseconds (`.seconds(Int64.max)`, the usual "forever") as `UInt64.max`.
    @inlinable
    package var milliseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000)
        // With seconds >= 0, attoseconds lie in 0..<10^18: at most 999 more milliseconds.
        let fraction = UInt64(max(0, attoseconds) / 1_000_000_000_000_000)
        let (total, over) = whole.addingReportingOverflow(fraction)
        return overflow || over ? .max : total
    }

    /// Whole nanoseconds, rounded toward zero; durations beyond `Int64`'s nanoseconds (about 292
    /// years either way) saturate.
    @inlinable
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return Int64(clamping: Int128(seconds) * 1_000_000_000 + Int128(attoseconds / 1_000_000_000))
    }

    /// The longest wait any timer, sleep or deadline of the library's is set for: 100 years of
    /// 365 days. A clock's deadline arithmetic and its conversion to nanoseconds cannot hold
    /// "forever" (`.seconds(Int64.max)`); this much is forever to a process.
    package static let longestTimer = Duration.seconds(100 * 365 * 86_400)

    /// `self` as a wait a clock can take: negative durations as zero, longer than
    /// ``longestTimer`` as that. Every user-given duration that reaches a clock, a timer or a
    /// deadline passes through it.
    package var forTimer: Duration { min(max(self, .zero), .longestTimer) }

    /// Seconds as a `Double`, for Foundation's and Dispatch's intervals.
    package var timeInterval: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
