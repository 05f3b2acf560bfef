/// Parses the durations `cache-dump` takes: a number and a unit, repeated (`90s`, `15m`, `12h`,
/// `7d`, `2w`, `500ms`, `1h30m`); a bare number is seconds.
public enum DurationArgument {
    /// The duration `text` names, or nil when it is not one.
    public static func parse(_ text: String) -> Duration? {
        let units: [(suffix: String, milliseconds: Int64)] = [
            ("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000), ("w", 604_800_000),
        ]
        var rest = Substring(text)
        guard !rest.isEmpty else { return nil }
        if let seconds = Int64(rest), seconds >= 0 { return .seconds(seconds) }
        var total: Int64 = 0
        while !rest.isEmpty {
            let digits = rest.prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty, digits.count <= 12, let number = Int64(digits) else { return nil }
            rest = rest.dropFirst(digits.count)
            let letters = rest.prefix(while: { $0.isASCII && $0.isLetter })
            guard let unit = units.first(where: { $0.suffix == letters }) else { return nil }
            rest = rest.dropFirst(letters.count)
            let (product, overflow) = number.multipliedReportingOverflow(by: unit.milliseconds)
            guard !overflow else { return nil }
            let (sum, overflowed) = total.addingReportingOverflow(product)
            guard !overflowed else { return nil }
            total = sum
        }
        return .milliseconds(total)
    }
}
