/// A value of Redis's serialization protocol, RESP2 or RESP3, as a server sends it.
///
/// Strings are bytes: Redis keys and values are binary, and a reply is never trusted to be UTF-8.
package enum RESPValue: Sendable, Hashable {
    /// `+OK`
    case simpleString([UInt8])
    /// `-ERR …` (RESP3's `!` bulk errors are parsed into this case too).
    case error([UInt8])
    /// `:42`
    case integer(Int64)
    /// `$…`; nil is RESP2's null bulk string (`$-1`).
    case bulkString([UInt8]?)
    /// `*…`; nil is RESP2's null array (`*-1`).
    case array([RESPValue]?)
    /// RESP3 `_`.
    case null
    /// RESP3 `#t` / `#f`.
    case boolean(Bool)
    /// RESP3 `,` (its text, as sent: `inf`, `-inf`, `nan` included).
    case double([UInt8])
    /// RESP3 `(` (its decimal digits, as sent).
    case bigNumber([UInt8])
    /// RESP3 `=`: the three-byte format (`txt`, `mkd`) and the text.
    case verbatimString(format: [UInt8], text: [UInt8])
    /// RESP3 `%`: key-value pairs in the order sent.
    case map([RESPPair])
    /// RESP3 `~`.
    case set([RESPValue])
    /// RESP3 `>`: out-of-band data (pub/sub messages, invalidations).
    case push([RESPValue])
}

/// One entry of a RESP3 map (`%`).
package struct RESPPair: Sendable, Hashable {
    package var key: RESPValue
    package var value: RESPValue

    package init(key: RESPValue, value: RESPValue) {
        self.key = key
        self.value = value
    }
}
