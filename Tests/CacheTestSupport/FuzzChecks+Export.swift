import CacheDump

extension FuzzChecks {
    /// cache-dump's export-file parser on one arbitrary line: the header check and the entry
    /// parser never crash, and an entry that parses writes a line that parses back to itself.
    public static func exportLine(_ input: [UInt8]) -> [String] {
        _ = try? ExportFormat.parseHeader(input)
        guard let entry = try? ExportFormat.parseEntry(input) else { return [] }
        var violations: [String] = []
        if entry.key.isEmpty { violations.append("an entry with an empty key was accepted") }
        if let expires = entry.expires, expires == 0 { violations.append("an expiry of 0 was accepted") }
        let line = Array(entry.line.utf8)
        if line.contains(UInt8(ascii: "\n")) { violations.append("an entry's line holds a newline") }
        if (try? ExportFormat.parseEntry(line)) != entry {
            violations.append("an entry's own line does not parse back to it")
        }
        return violations
    }
}
