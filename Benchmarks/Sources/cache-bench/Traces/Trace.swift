import CBenchZlib
import Foundation

/// The trace formats the hit-rate suite reads.
enum TraceFormat: String, Sendable {
    /// The ARC paper's `.lis`: lines `start count ignored request`, each expanded into `count`
    /// requests for pages `start ..< start + count`. Count-bounded: every page costs 1.
    case arc
    /// libCacheSim's `oracleGeneral` `.bin`: 24-byte little-endian records `u32 time, u64 id,
    /// u32 size, i64 next access`. Byte-bounded: each object costs its size. Records of size 0
    /// are skipped, as libCacheSim skips them (``Trace/skippedZeroSize``).
    case oracle
    /// Plain text, one key per line: any bytes but the line's end, spaces, tabs and a carriage
    /// return around it trimmed; empty lines skipped. Count-bounded: every key costs 1. Keys get
    /// ids in the order they first appear, so no two keys share one.
    case plain

    /// The format a file name suggests (`.lis` or `oracleGeneral`), if any.
    init?(guessingFrom path: String) {
        let name = URL(fileURLWithPath: path).lastPathComponent
        if name.contains(".lis") {
            self = .arc
        } else if name.contains("oracleGeneral") || name.contains(".bin") {
            self = .oracle
        } else {
            return nil
        }
    }
}

/// `--trace PATH [--trace-format F] [--sizes N,...]`, or a bundled trace: one trace to replay at
/// given capacities.
struct TraceRequest: Sendable {
    var path: String
    var format: TraceFormat
    /// Capacities (entries for arc, bytes for oracle); nil: the reference sizes, if known.
    var sizes: [Int]?
    /// Whether it is one of the bundled traces (Benchmarks/Traces), for the report.
    var bundled = false
}

/// A replayable trace: the requested object ids in order, with each request's size.
struct Trace: Sendable {
    var name: String
    var format: TraceFormat
    var ids: [UInt64]
    /// Bytes of each request (all 1 for arc traces).
    var sizes: [UInt32]
    /// Oracle traces: records of size 0, left out of ``ids`` and ``sizes`` as libCacheSim's
    /// oracleGeneral reader leaves them out (it reads on to the next record, so they are neither
    /// requests nor misses in its figures). Always 0 for arc traces.
    var skippedZeroSize = 0

    /// Reads `path`, gzip-compressed or plain (zlib's gz functions read both).
    init(path: String, format: TraceFormat) throws {
        name = URL(fileURLWithPath: path).lastPathComponent
        self.format = format
        let bytes = try Self.readAll(path)
        ids = []
        sizes = []
        switch format {
        case .arc: try parseARC(bytes)
        case .oracle: try parseOracle(bytes)
        case .plain: parsePlain(bytes)
        }
    }

    private mutating func parseARC(_ bytes: [UInt8]) throws {
        var fields: [UInt64] = []
        var current: UInt64 = 0
        var inNumber = false
        var lineNumber = 1
        func endLine() throws {
            if inNumber { fields.append(current) }
            inNumber = false
            current = 0
            defer { fields.removeAll(keepingCapacity: true) }
            if fields.isEmpty { return }
            guard fields.count >= 2 else {
                throw TraceFailure(description: "\(name): line \(lineNumber): too few fields")
            }
            // Untrusted input: a range past UInt64.max is an error, not a trap.
            let (end, overflow) = fields[0].addingReportingOverflow(fields[1])
            guard !overflow else {
                throw TraceFailure(description: "\(name): line \(lineNumber): page range overflows")
            }
            for page in fields[0]..<end {
                ids.append(page)
                sizes.append(1)
            }
        }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                current = current &* 10 &+ UInt64(byte - UInt8(ascii: "0"))
                inNumber = true
            case UInt8(ascii: "\n"):
                try endLine()
                lineNumber += 1
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                if inNumber { fields.append(current) }
                inNumber = false
                current = 0
            default:
                throw TraceFailure(description: "\(name): line \(lineNumber): unexpected byte \(byte)")
            }
        }
        try endLine()
    }

    private mutating func parsePlain(_ bytes: [UInt8]) {
        var known: [ArraySlice<UInt8>: UInt64] = [:]
        func isBlank(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
        }
        for var line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            while let first = line.first, isBlank(first) { line = line.dropFirst() }
            while let last = line.last, isBlank(last) { line = line.dropLast() }
            guard !line.isEmpty else { continue }
            let id: UInt64
            if let seen = known[line] {
                id = seen
            } else {
                id = UInt64(known.count)
                known[line] = id
            }
            ids.append(id)
            sizes.append(1)
        }
    }

    private mutating func parseOracle(_ bytes: [UInt8]) throws {
        let recordSize = 24
        guard bytes.count % recordSize == 0 else {
            throw TraceFailure(description: "\(name): \(bytes.count) bytes is not a whole number of 24-byte records")
        }
        let count = bytes.count / recordSize
        ids.reserveCapacity(count)
        sizes.reserveCapacity(count)
        bytes.withUnsafeBytes { raw in
            for index in 0..<count {
                let base = index * recordSize
                let size = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: base + 12, as: UInt32.self))
                // As libCacheSim: its oracleGeneralBin_read_one_req reads the next record instead
                // when `req->obj_size == 0 && reader->ignore_size_zero_req` (reading forward), and
                // setup_reader sets ignore_size_zero_req to true by default (1a1a11a/libCacheSim at
                // 08cc88068f8eadcc5e69066c436a5e8246a64c3a: libCacheSim/traceReader/customizedReader/
                // oracle/oracleGeneralBin.h lines 46-48, libCacheSim/traceReader/reader.c line 67).
                guard size > 0 else {
                    skippedZeroSize += 1
                    continue
                }
                ids.append(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: base + 4, as: UInt64.self)))
                sizes.append(size)
            }
        }
    }

    /// The whole file, decompressed when it is gzip (gzread passes plain files through).
    private static func readAll(_ path: String) throws -> [UInt8] {
        guard let file = gzopen(path, "rb") else { throw TraceFailure(description: "cannot open \(path)") }
        defer { gzclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let got = chunk.withUnsafeMutableBytes { gzread(file, $0.baseAddress, UInt32($0.count)) }
            if got < 0 { throw TraceFailure(description: "cannot read \(path) (corrupt gzip?)") }
            if got == 0 { break }
            bytes += chunk[0..<Int(got)]
        }
        return bytes
    }
}

/// A trace that cannot be read.
struct TraceFailure: Error, CustomStringConvertible {
    let description: String
}
