// The units a Duration is converted to, in one place: milliseconds for the store, nanoseconds
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
        return overflow ? .max : whole.addingSaturating(fraction)
    }

    /// Whole nanoseconds, rounded toward zero. For intervals and elapsed times, which stay far
    /// inside `Int64` (about 292 years); a longer duration traps.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Seconds as a `Double`, for Foundation's and Dispatch's intervals.
    package var timeInterval: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
