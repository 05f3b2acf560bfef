import Foundation

/// How `cache-dump` writes sizes, times and tables for people, and JSON for programs.
enum OutputFormatting {
    /// `12,345`.
    static func count(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        return (value < 0 ? "-" : "") + grouped
    }

    /// `1 entry`, `12,345 entries`: the count and the noun that agrees with it.
    static func count(_ value: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(count(value)) " + (value == 1 ? singular : plural ?? singular + "s")
    }

    /// `1.5 MiB` (binary units), `512 B`.
    static func bytes(_ value: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var amount = Double(value)
        var unit = 0
        while amount >= 1024 && unit < units.count - 1 {
            amount /= 1024
            unit += 1
        }
        return unit == 0 ? "\(value) B" : String(format: "%.1f %@", amount, units[unit])
    }

    /// `2026-11-23T14:42:22Z` for milliseconds since 1970.
    static func time(_ milliseconds: UInt64) -> String {
        var seconds = time_t(milliseconds / 1_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }

    /// Rows under a header, each column as wide as its widest cell; numbers right-aligned when
    /// `rightAligned` says so.
    static func table(_ header: [String], _ rows: [[String]], rightAligned: Set<Int> = []) -> String {
        var widths = header.map(\.count)
        for row in rows {
            for (column, cell) in row.enumerated() { widths[column] = max(widths[column], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                if column == cells.count - 1 && !rightAligned.contains(column) { return cell }
                return rightAligned.contains(column) ? padding + cell : cell + padding
            }.joined(separator: "  ")
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n") + "\n"
    }

    /// `value` as JSON text (keys sorted) with a final newline.
    static func json(_ value: Any) throws -> String {
        let data = try JSONSerialization.data(
            withJSONObject: value, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}

/// Standard output and error for the commands: text, raw bytes, and one-line messages.
enum Console {
    static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    static func write(bytes: [UInt8]) {
        FileHandle.standardOutput.write(Data(bytes))
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data("cache-dump: \(text)\n".utf8))
    }
}
