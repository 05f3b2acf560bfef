import Foundation

/// Turns a ``Cache``'s values into the bytes its disk tier stores, and back.
///
/// A codec must be deterministic enough that `decode(encode(v))` gives a value equal to `v`.
/// Errors thrown by either call are reported as ``CacheError/codecFailed(operation:reason:)``:
/// an insert whose value cannot be encoded stays in memory only, and a stored value that cannot
/// be decoded is a miss and is removed.
public protocol ValueCodec<Value>: Sendable {
    /// The type of value the codec converts.
    associatedtype Value

    /// The bytes to store for `value`.
    func encode(_ value: Value) throws -> [UInt8]
    /// The value stored as `bytes`.
    func decode(_ bytes: [UInt8]) throws -> Value
}

/// Stores `Codable` values as JSON: the default codec for `Codable` values.
public struct JSONCodec<Value: Codable>: ValueCodec {
    /// A codec with Foundation's default JSON encoding.
    public init() {}

    /// The value's JSON.
    public func encode(_ value: Value) throws -> [UInt8] {
        Array(try JSONEncoder().encode(value))
    }

    /// The value decoded from JSON.
    public func decode(_ bytes: [UInt8]) throws -> Value {
        try JSONDecoder().decode(Value.self, from: Data(bytes))
    }
}

/// Stores byte arrays as they are: the default codec for `[UInt8]` values.
public struct BytesCodec: ValueCodec {
    /// The identity codec.
    public init() {}

    /// The bytes themselves.
    public func encode(_ value: [UInt8]) throws -> [UInt8] { value }

    /// The bytes themselves.
    public func decode(_ bytes: [UInt8]) throws -> [UInt8] { bytes }
}

/// Stores `Data` values as their bytes: the default codec for `Data` values.
public struct DataCodec: ValueCodec {
    /// The identity codec for `Data`.
    public init() {}

    /// The data's bytes.
    public func encode(_ value: Data) throws -> [UInt8] { Array(value) }

    /// The bytes as `Data`.
    public func decode(_ bytes: [UInt8]) throws -> Data { Data(bytes) }
}

/// Stores strings as UTF-8: the default codec for `String` values.
public struct StringCodec: ValueCodec {
    /// The UTF-8 codec.
    public init() {}

    /// The string's UTF-8 bytes.
    public func encode(_ value: String) throws -> [UInt8] { Array(value.utf8) }

    /// The string whose UTF-8 bytes these are.
    /// - Throws: ``CacheError/codecFailed(operation:reason:)`` when they are not valid UTF-8.
    public func decode(_ bytes: [UInt8]) throws -> String {
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw CacheError.codecFailed(operation: "decode", reason: "the stored bytes are not valid UTF-8")
        }
        return string
    }
}
