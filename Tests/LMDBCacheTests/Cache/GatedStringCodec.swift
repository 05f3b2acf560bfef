import Dispatch

import LMDBCacheStorage

@testable import LMDBCache

/// A UTF-8 string codec that a test can stop inside `encode` or `decode`, to force one
/// interleaving of a cache call with another thread's calls: the codec signals `entered` and waits
/// for `release` once, for the first value equal to `gatedValue` (encode) or stored as it (decode).
/// The value `"undecodable"` fails to decode, and `"unencodable"` fails to encode.
final class GatedStringCodec: ValueCodec, Sendable {
    enum Stage: Sendable { case encode, decode }

    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    private let stage: Stage?
    private let gatedValue: String
    private let armed = Locked(true)

    /// A codec that stops at `stage` (never, when nil) for `gatedValue`.
    init(stoppingAt stage: Stage? = nil, for gatedValue: String = "") {
        self.stage = stage
        self.gatedValue = gatedValue
    }

    func encode(_ value: String) throws -> [UInt8] {
        if stage == .encode && value == gatedValue { stopOnce() }
        if value == "unencodable" { throw CacheError.codecFailed(operation: "encode", reason: "refused by the test") }
        return Array(value.utf8)
    }

    func decode(_ bytes: [UInt8]) throws -> String {
        let value = String(decoding: bytes, as: UTF8.self)
        if stage == .decode && value == gatedValue { stopOnce() }
        if value == "undecodable" { throw CacheError.codecFailed(operation: "decode", reason: "refused by the test") }
        return value
    }

    private func stopOnce() {
        guard
            armed.withLock({ armed in
                defer { armed = false }
                return armed
            })
        else { return }
        entered.signal()
        release.wait()
    }
}
