import Foundation

/// The bytes this process, every thread of it, has caused to be written to storage: the
/// `write_bytes` line of `/proc/self/io`. The kernel counts a file page when a write dirties it,
/// so a page written twice before it reaches the disk counts once, and a page written again after
/// a sync counts again: what a store's writes cost the device, in pages (LMDB writes whole 4 KiB
/// pages; RocksDB's WAL appends, and its background flushes and compactions run in this process).
enum ProcessWrites {
    /// The count so far; nil where the kernel does not keep it (no task I/O accounting).
    static func bytes() -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("write_bytes:") {
            return UInt64(line.dropFirst("write_bytes:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
