/// Why ``RESPParser`` refused a reply: the bytes are not RESP2/RESP3, or they exceed a limit of
/// ``RESPParser/Limits``. A parser that threw keeps throwing the same error: a connection whose reply
/// stream is broken must be closed.
package enum RESPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A value starts with a byte that is no RESP type (RESP3's streamed-string chunk `;` and end
    /// `.`, which Redis never sends, included).
    case unknownType(UInt8)
    /// A line is not ended by CRLF, holds a lone CR or LF, or a bulk payload is not followed by CRLF.
    case invalidLineEnding
    /// A line (a simple string, error, number or header) is longer than ``RESPParser/Limits/maxLineLength``.
    case lineTooLong
    /// A length or count is not decimal digits, or is negative other than -1 where -1 means null
    /// (a streamed string or aggregate's `?`, which Redis never sends, included).
    case invalidLength
    /// A bulk string's length exceeds ``RESPParser/Limits/maxBulkLength``.
    case bulkTooLong(Int)
    /// An aggregate's element count exceeds ``RESPParser/Limits/maxAggregateCount``.
    case tooManyElements(Int)
    /// Aggregates are nested deeper than ``RESPParser/Limits/maxDepth``.
    case nestingTooDeep
    /// An integer (`:`) is not a decimal number that fits 64 bits.
    case invalidInteger
    /// A RESP3 value's text does not have its type's form: a boolean other than `t`/`f`, a null with
    /// content, a double or big number that is not a number, a verbatim string without `xxx:`.
    case invalidValue(type: UInt8)

    package var description: String {
        switch self {
        case .unknownType(let byte): "unknown RESP type byte 0x\(String(byte, radix: 16))"
        case .invalidLineEnding: "a line or bulk payload is not ended by CRLF"
        case .lineTooLong: "a line exceeds the parser's limit"
        case .invalidLength: "an invalid length or count"
        case .bulkTooLong(let length): "a bulk string of \(length) bytes exceeds the parser's limit"
        case .tooManyElements(let count): "an aggregate of \(count) elements exceeds the parser's limit"
        case .nestingTooDeep: "aggregates nested deeper than the parser's limit"
        case .invalidInteger: "an integer that is not a decimal 64-bit number"
        case .invalidValue(let type): "an invalid value of RESP type '\(Character(Unicode.Scalar(type)))'"
        }
    }
}
