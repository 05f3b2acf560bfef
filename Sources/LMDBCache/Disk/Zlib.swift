import CZlib
import Foundation

/// zlib for the disk tier: raw deflate and inflate with reused streams, and crc32.
///
/// The only file that touches `CZlib`. Streams are pooled because `deflateInit2` allocates about
/// 270 KB and costs more than compressing a 4 KB value; `deflateReset` makes a stream new again.
enum Zlib {
    /// crc32 of `bytes`, continuing from `seed`.
    @inline(__always)
    static func crc32(_ bytes: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress else { return seed }
        return UInt32(
            CZlib.crc32_z(UInt(seed), base.assumingMemoryBound(to: UInt8.self), bytes.count))
    }

    /// A quick guess that deflate will not pay: the order-0 entropy of a sample of up to 512 bytes
    /// is close to 8 bits a byte (random, encrypted or already-compressed data). Costs about a
    /// microsecond, against 65-150 µs for deflating 4 KB that will not shrink.
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

    /// Deflates `input` into `output` at `level`; returns the compressed length, or nil when the
    /// result would not fit in `output` (so it would not save space).
    static func deflate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, level: Int32)
        -> Int?
    {
        guard let inBase = input.baseAddress, let outBase = output.baseAddress, output.count > 0 else { return nil }
        let stream = deflaters.take(level: level)
        defer { deflaters.give(stream) }
        let z = stream.pointer
        z.pointee.next_in = UnsafeMutablePointer(mutating: inBase.assumingMemoryBound(to: Bytef.self))
        z.pointee.avail_in = uInt(input.count)
        z.pointee.next_out = outBase.assumingMemoryBound(to: Bytef.self)
        z.pointee.avail_out = uInt(output.count)
        let status = CZlib.deflate(z, Z_FINISH)
        defer { deflateReset(z) }
        guard status == Z_STREAM_END else { return nil }
        return Int(z.pointee.total_out)
    }

    /// Inflates `input` into `output`, which must be exactly the original length; false when the
    /// input is not a valid deflate stream of that length.
    static func inflate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        guard let inBase = input.baseAddress, let outBase = output.baseAddress else { return false }
        let stream = inflaters.take(level: 0)
        defer { inflaters.give(stream) }
        let z = stream.pointer
        defer { inflateReset(z) }
        z.pointee.next_in = UnsafeMutablePointer(mutating: inBase.assumingMemoryBound(to: Bytef.self))
        z.pointee.avail_in = uInt(input.count)
        z.pointee.next_out = outBase.assumingMemoryBound(to: Bytef.self)
        z.pointee.avail_out = uInt(output.count)
        let status = CZlib.inflate(z, Z_FINISH)
        return status == Z_STREAM_END && Int(z.pointee.total_out) == output.count && z.pointee.avail_in == 0
    }

    private static let deflaters = StreamPool(inflating: false)
    private static let inflaters = StreamPool(inflating: true)
}

/// A z_stream on the heap (zlib keeps pointers into it).
private final class ZStream: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<z_stream>
    let level: Int32
    let inflating: Bool

    init?(inflating: Bool, level: Int32) {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: z_stream())
        self.level = level
        self.inflating = inflating
        let status = inflating ? lmdbcache_inflate_init(pointer) : lmdbcache_deflate_init(pointer, level)
        guard status == Z_OK else {
            pointer.deallocate()
            return nil
        }
    }

    deinit {
        if inflating { inflateEnd(pointer) } else { deflateEnd(pointer) }
        pointer.deallocate()
    }
}

/// Idle streams, a few per level; streams beyond the cap are freed.
private final class StreamPool: Sendable {
    private let idle = Locked<[ZStream]>([])
    private let inflating: Bool
    private static let maxIdle = 16

    init(inflating: Bool) {
        self.inflating = inflating
    }

    func take(level: Int32) -> ZStream {
        let pooled = idle.withLock { streams -> ZStream? in
            guard let index = streams.lastIndex(where: { $0.level == level }) else { return nil }
            return streams.remove(at: index)
        }
        if let pooled { return pooled }
        guard let stream = ZStream(inflating: inflating, level: level) else {
            fatalError("zlib could not allocate a stream (out of memory)")
        }
        return stream
    }

    func give(_ stream: ZStream) {
        idle.withLock { streams in
            if streams.count < Self.maxIdle { streams.append(stream) }
        }
    }
}
