import CDeflate
import Foundation
import LMDBCacheStorage

/// Raw DEFLATE and crc32 for the disk tier, through libdeflate.
///
/// The only file that touches `CDeflate`. Records hold raw DEFLATE streams (RFC 1951, what zlib
/// writes with negative window bits), so stores written with zlib read unchanged. libdeflate
/// works on whole buffers, which is all a record needs, and inflates a 4 KB JSON value in about
/// half zlib's time, deflates it in about two thirds, and computes crc32 several times faster
/// (carry-less multiplication). Its compressors and decompressors are not thread-safe and a
/// compressor costs more to allocate than a 4 KB value costs to deflate, so both are pooled.
enum Deflate {
    /// The levels a store deflates at: 1 (fastest) to 9 (smallest).
    static let levels: ClosedRange<Int> = 1...9

    /// crc32 (the zlib and gzip polynomial) of `bytes`, continuing from `seed`.
    @inline(__always)
    static func crc32(_ bytes: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress else { return seed }
        return libdeflate_crc32(seed, base, bytes.count)
    }

    /// A quick guess that deflate will not pay: the order-0 entropy of a sample of up to 512 bytes
    /// is close to 8 bits a byte (random, encrypted or already-compressed data). Costs about a
    /// microsecond, against tens of microseconds for deflating 4 KB that will not shrink.
    static func looksIncompressible(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let sampleSize = min(bytes.count, 512)
        guard sampleSize >= 64 else { return false }
        let step = bytes.count / sampleSize
        return withUnsafeTemporaryAllocation(of: UInt16.self, capacity: 256) { histogram in
            histogram.initialize(repeating: 0)
            for index in 0..<sampleSize {
                histogram[Int(bytes[index * step])] &+= 1
            }
            let n = Double(sampleSize)
            var sum = 0.0
            entropyTerms.withUnsafeBufferPointer { terms in
                for count in histogram { sum += terms[Int(count)] }
            }
            let bitsPerByte = log2(n) - sum / n
            // A uniform sample of 512 bytes measures about 7.6 bits; text and JSON 4.5 to 6.
            return bitsPerByte > 7.2
        }
    }

    /// c · log2(c) for every count a 512-byte sample can give a byte value.
    private static let entropyTerms: [Double] = (0...512).map { $0 == 0 ? 0 : Double($0) * log2(Double($0)) }

    /// Deflates `input` into `output` at `level` (clamped to ``levels``); returns the compressed
    /// length, or nil when the result would not fit in `output` (so it would not save space).
    static func deflate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, level: Int)
        -> Int?
    {
        guard let inBase = input.baseAddress, let outBase = output.baseAddress, output.count > 0 else { return nil }
        let level = min(max(level, levels.lowerBound), levels.upperBound)
        let compressor = compressors.take(level: level)
        defer { compressors.give(compressor) }
        let written = libdeflate_deflate_compress(compressor.pointer, inBase, input.count, outBase, output.count)
        return written == 0 ? nil : written
    }

    /// Inflates `input` into `output`, which must be exactly the original length; false when the
    /// input is not a valid DEFLATE stream of exactly that length, or has bytes past its end.
    static func inflate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        guard let inBase = input.baseAddress, let outBase = output.baseAddress else { return false }
        let decompressor = decompressors.take(level: 0)
        defer { decompressors.give(decompressor) }
        var consumed = 0
        var produced = 0
        let result = libdeflate_deflate_decompress_ex(
            decompressor.pointer, inBase, input.count, outBase, output.count, &consumed, &produced)
        return result == LIBDEFLATE_SUCCESS && produced == output.count && consumed == input.count
    }

    private static let compressors = CoderPool(compressing: true)
    private static let decompressors = CoderPool(compressing: false)
}

/// A libdeflate compressor (of one level) or decompressor.
private final class Coder: @unchecked Sendable {
    let pointer: OpaquePointer
    let level: Int
    let compressing: Bool

    init?(compressing: Bool, level: Int) {
        guard
            let pointer = compressing
                ? libdeflate_alloc_compressor(Int32(level)) : libdeflate_alloc_decompressor()
        else { return nil }
        self.pointer = pointer
        self.level = level
        self.compressing = compressing
    }

    deinit {
        if compressing { libdeflate_free_compressor(pointer) } else { libdeflate_free_decompressor(pointer) }
    }
}

/// Idle coders, a few per level; coders beyond the cap are freed.
private final class CoderPool: Sendable {
    private let idle = Locked<[Coder]>([])
    private let compressing: Bool
    private static let maxIdle = 16

    init(compressing: Bool) {
        self.compressing = compressing
    }

    func take(level: Int) -> Coder {
        let pooled = idle.withLock { coders -> Coder? in
            guard let index = coders.lastIndex(where: { $0.level == level }) else { return nil }
            return coders.remove(at: index)
        }
        if let pooled { return pooled }
        guard let coder = Coder(compressing: compressing, level: level) else {
            fatalError("libdeflate could not allocate a \(compressing ? "compressor" : "decompressor") (out of memory)")
        }
        return coder
    }

    func give(_ coder: Coder) {
        idle.withLock { coders in
            if coders.count < Self.maxIdle { coders.append(coder) }
        }
    }
}
