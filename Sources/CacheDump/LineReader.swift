import Foundation
import Glibc

/// The lines of a file descriptor, read a megabyte at a time, none longer than a limit: a line
/// that passes the limit is refused there, without the rest of it being read into memory. Lines
/// end at "\n", which is not part of them; a last line without one counts.
struct LineReader {
    /// Why reading stopped early.
    enum Failure: Error {
        /// Line `line` (counted from 1) is longer than the limit.
        case tooLong(line: Int)
        /// `read(2)` failed with this errno.
        case read(Int32)
        /// Copying what was read to the copy file failed (`write(2)`) with this errno.
        case copy(Int32)
    }

    /// The longest line returned, in bytes.
    let limit: Int
    private let descriptor: Int32
    /// A file that receives every byte read, or -1.
    private let copy: Int32
    private var chunk: [UInt8]
    /// The bytes of `chunk` not yet split into lines.
    private var start = 0
    private var end = 0
    /// The line read so far, when it began in an earlier chunk.
    private var partial = Data()
    private var atEnd = false
    /// The number of the line last returned (from 1).
    private(set) var lineNumber = 0

    /// Reads from `descriptor`, at its current offset, lines of at most `limit` bytes, writing a
    /// copy of every byte read to `copy` unless it is -1.
    init(descriptor: Int32, limit: Int, copyingTo copy: Int32 = -1, chunkSize: Int = 1 << 20) {
        self.descriptor = descriptor
        self.limit = limit
        self.copy = copy
        chunk = [UInt8](repeating: 0, count: max(chunkSize, 1))
    }

    /// The next line, or nil after the last one. ``lineNumber`` is its number.
    mutating func next() throws(Failure) -> Data? {
        while true {
            if start < end {
                let (first, last) = (start, end)
                let newline: Int? = chunk.withUnsafeBytes { buffer in
                    let base = buffer.baseAddress!
                    return memchr(base + first, 0x0a, last - first).map { base.distance(to: UnsafeRawPointer($0)) }
                }
                let stop = newline ?? end
                guard partial.count + (stop - start) <= limit else { throw .tooLong(line: lineNumber + 1) }
                chunk.withUnsafeBytes { buffer in
                    partial.append(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self) + first, count: stop - first)
                }
                if let newline {
                    start = newline + 1
                    return take()
                }
                start = end
            }
            if atEnd { return nil }
            let count = try fill()
            if count == 0 {
                atEnd = true
                return partial.isEmpty ? nil : take()
            }
            start = 0
            end = count
        }
    }

    /// The line read so far, counted.
    private mutating func take() -> Data {
        lineNumber += 1
        defer { partial = Data() }
        return partial
    }

    /// Reads the next chunk (copying it when asked); its length, 0 at the end of the file.
    private mutating func fill() throws(Failure) -> Int {
        let descriptor = descriptor
        let copy = copy
        let result = chunk.withUnsafeMutableBytes { buffer -> Result<Int, Failure> in
            var count: Int
            repeat {
                count = Glibc.read(descriptor, buffer.baseAddress!, buffer.count)
            } while count < 0 && errno == EINTR
            guard count >= 0 else { return .failure(.read(errno)) }
            guard copy >= 0 else { return .success(count) }
            var written = 0
            while written < count {
                let step = Glibc.write(copy, buffer.baseAddress! + written, count - written)
                if step < 0 {
                    if errno == EINTR { continue }
                    return .failure(.copy(errno))
                }
                written += step
            }
            return .success(count)
        }
        return try result.get()
    }
}
