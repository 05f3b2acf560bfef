import Foundation

/// The log the power-loss recorder writes (see `Tests/PowerLoss/record-io.c`), and the crash
/// states a power loss could leave behind, built from it as ALICE (OSDI '14) does.
///
/// Each record: a type byte, a file index byte, an 8-byte offset and an 8-byte length (little
/// endian), then, for a write, the bytes written.
public struct PowerLossLog: Sendable {
    public enum Entry: Sendable, Equatable {
        case write(file: Int, offset: Int, bytes: [UInt8])
        case truncate(file: Int, length: Int)
        /// A completed `fsync`/`fdatasync` of the file, or a write through an O_DSYNC descriptor.
        case sync(file: Int)
        /// Written by the writer after a confirmation: everything it confirmed as `id` is durable.
        case marker(id: Int)
    }

    public let entries: [Entry]

    public struct Malformed: Error {}

    /// Reads a log; a truncated last record is an error (the writer is expected to have ended).
    public init(contentsOf path: String) throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var entries: [Entry] = []
        var position = 0
        func number(at start: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in 0..<8 { value |= UInt64(bytes[start + index]) << (8 * index) }
            return value
        }
        while position < bytes.count {
            guard bytes.count - position >= 18 else { throw Malformed() }
            let file = Int(bytes[position + 1])
            // Lengths and offsets come from a file: checked before use, never trapped on.
            guard let offset = Int(exactly: number(at: position + 2)),
                let length = Int(exactly: number(at: position + 10))
            else { throw Malformed() }
            position += 18
            switch bytes[position - 18] {
            case UInt8(ascii: "W"):
                guard length <= bytes.count - position else { throw Malformed() }
                entries.append(.write(file: file, offset: offset, bytes: Array(bytes[position..<(position + length)])))
                position += length
            case UInt8(ascii: "T"): entries.append(.truncate(file: file, length: length))
            case UInt8(ascii: "S"): entries.append(.sync(file: file))
            case UInt8(ascii: "M"): entries.append(.marker(id: offset))
            default: throw Malformed()
            }
        }
        self.entries = entries
    }

    /// Appends a marker record to the log at `path` (one `write`, O_APPEND, as the recorder does).
    public static func appendMarker(_ id: Int, toLogAt path: String) {
        var record = [UInt8](repeating: 0, count: 18)
        record[0] = UInt8(ascii: "M")
        withUnsafeBytes(of: UInt64(id).littleEndian) { record.replaceSubrange(2..<10, with: $0) }
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        _ = record.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
    }

    /// One state the files could be in after a power loss at some point of the log.
    public struct CrashState: Sendable {
        /// The log position the power failed at (entries before it had happened).
        public var point: Int
        /// The newest marker before the point: what the writer had confirmed (nil: nothing).
        public var confirmedMarker: Int?
        /// Each recorded file's bytes (index as in the recorder's file list); nil: never written.
        public var files: [[UInt8]?]
        /// True when the power failed before the first completed sync of the first file (LMDB's
        /// data file): the store's creation itself had not reached the disk.
        public var beforeFirstSync: Bool
        /// Writes after the last sync that this state kept, and how many of them are torn.
        public var keptWrites: Int
        public var tornWrites: Int
    }

    /// How many files the log mentions.
    public var fileCount: Int {
        entries.reduce(0) { count, entry in
            switch entry {
            case .write(let file, _, _), .truncate(let file, _), .sync(let file): max(count, file + 1)
            case .marker: count
            }
        }
    }

    /// A crash state at a random point: every write to a file before that file's last completed
    /// sync, plus a random subset of its later writes (in order), a quarter of them torn at
    /// 512-byte sectors (a random subset of their sectors reaches the disk).
    public func crashState<G: RandomNumberGenerator>(using generator: inout G) -> CrashState {
        let point = Int.random(in: 0...entries.count, using: &generator)
        var lastSync = [Int](repeating: -1, count: fileCount)
        var confirmed: Int?
        for index in 0..<point {
            switch entries[index] {
            case .sync(let file): lastSync[file] = index
            case .marker(let id): confirmed = id
            default: break
            }
        }
        var files = [[UInt8]?](repeating: nil, count: fileCount)
        var kept = 0
        var torn = 0
        for index in 0..<point {
            switch entries[index] {
            case .write(let file, let offset, let bytes):
                let durable = index < lastSync[file]
                if !durable {
                    guard Bool.random(using: &generator) else { continue }
                    kept += 1
                }
                var contents = files[file] ?? []
                if contents.count < offset + bytes.count {
                    contents.append(contentsOf: [UInt8](repeating: 0, count: offset + bytes.count - contents.count))
                }
                if !durable && Int.random(in: 0..<4, using: &generator) == 0 {
                    torn += 1
                    // Sectors are aligned to the file, not to the write.
                    var start = offset
                    while start < offset + bytes.count {
                        let end = min((start / 512 + 1) * 512, offset + bytes.count)
                        if Bool.random(using: &generator) {
                            contents.replaceSubrange(start..<end, with: bytes[(start - offset)..<(end - offset)])
                        }
                        start = end
                    }
                } else {
                    contents.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
                }
                files[file] = contents
            case .truncate(let file, let length):
                if index > lastSync[file] && !Bool.random(using: &generator) { continue }
                var contents = files[file] ?? []
                if contents.count > length {
                    contents.removeLast(contents.count - length)
                } else {
                    contents.append(contentsOf: [UInt8](repeating: 0, count: length - contents.count))
                }
                files[file] = contents
            case .sync, .marker: break
            }
        }
        return CrashState(
            point: point, confirmedMarker: confirmed, files: files,
            beforeFirstSync: lastSync.first.map { $0 < 0 } ?? true,
            keptWrites: kept, tornWrites: torn)
    }
}

/// A seeded generator (SplitMix64), so a power-loss run is reproducible from its seed.
public struct PowerLossRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}
