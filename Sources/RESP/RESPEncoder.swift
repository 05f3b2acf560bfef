/// Encodes what a client sends (commands) and, for tests and tools, what a server sends (values).
package enum RESPEncoder {
    /// Appends one command to `output`: an array of bulk strings, the form Redis accepts from a
    /// client (`*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n`). Arguments are binary and sent as they are.
    package static func encodeCommand(_ arguments: [[UInt8]], into output: inout [UInt8]) {
        output.append(UInt8(ascii: "*"))
        appendDecimal(arguments.count, to: &output)
        appendCRLF(to: &output)
        for argument in arguments {
            output.append(UInt8(ascii: "$"))
            appendDecimal(argument.count, to: &output)
            appendCRLF(to: &output)
            output.append(contentsOf: argument)
            appendCRLF(to: &output)
        }
    }

    /// One command's bytes: ``encodeCommand(_:into:)`` into a new array of exactly its size.
    package static func encodeCommand(_ arguments: [[UInt8]]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(encodedCommandLength(arguments))
        encodeCommand(arguments, into: &output)
        return output
    }

    /// The size in bytes of ``encodeCommand(_:into:)``'s output for `arguments`.
    package static func encodedCommandLength(_ arguments: [[UInt8]]) -> Int {
        var length = 3 + decimalLength(arguments.count)
        for argument in arguments { length += 5 + decimalLength(argument.count) + argument.count }
        return length
    }

    /// Appends `value` as a server would send it (RESP3 types with their RESP3 markers).
    ///
    /// Round-trips through ``RESPParser`` for every value the parser returns. A value built by hand
    /// need not be valid RESP: a simple string holding CR or LF, a verbatim format that is
    /// not 3 bytes, or a double or big number that is no number encode into bytes the parser refuses.
    package static func encodeValue(_ value: RESPValue, into output: inout [UInt8]) {
        // An explicit stack rather than recursion: values parsed from the wire may be deep.
        var pending: [RESPValue] = [value]
        while let value = pending.popLast() {
            switch value {
            case .simpleString(let text): appendLine(UInt8(ascii: "+"), text, to: &output)
            case .error(let text):
                // A bulk error (`!`) can hold what a simple one cannot.
                if text.contains(UInt8(ascii: "\r")) || text.contains(UInt8(ascii: "\n")) {
                    appendBulk(UInt8(ascii: "!"), text, to: &output)
                } else {
                    appendLine(UInt8(ascii: "-"), text, to: &output)
                }
            case .integer(let integer): appendLine(UInt8(ascii: ":"), Array(String(integer).utf8), to: &output)
            case .bulkString(nil): appendLine(UInt8(ascii: "$"), Array("-1".utf8), to: &output)
            case .bulkString(let bytes?): appendBulk(UInt8(ascii: "$"), bytes, to: &output)
            case .array(nil): appendLine(UInt8(ascii: "*"), Array("-1".utf8), to: &output)
            case .array(let elements?): appendAggregate(UInt8(ascii: "*"), elements, to: &output, pending: &pending)
            case .null: appendLine(UInt8(ascii: "_"), [], to: &output)
            case .boolean(let flag):
                appendLine(UInt8(ascii: "#"), [flag ? UInt8(ascii: "t") : UInt8(ascii: "f")], to: &output)
            case .double(let text): appendLine(UInt8(ascii: ","), text, to: &output)
            case .bigNumber(let text): appendLine(UInt8(ascii: "("), text, to: &output)
            case .verbatimString(let format, let text):
                appendBulk(UInt8(ascii: "="), format + [UInt8(ascii: ":")] + text, to: &output)
            case .map(let pairs):
                output.append(UInt8(ascii: "%"))
                appendDecimal(pairs.count, to: &output)
                appendCRLF(to: &output)
                for pair in pairs.reversed() {
                    pending.append(pair.value)
                    pending.append(pair.key)
                }
            case .set(let elements): appendAggregate(UInt8(ascii: "~"), elements, to: &output, pending: &pending)
            case .push(let elements): appendAggregate(UInt8(ascii: ">"), elements, to: &output, pending: &pending)
            }
        }
    }

    /// One value's bytes, as ``encodeValue(_:into:)`` writes them.
    package static func encodeValue(_ value: RESPValue) -> [UInt8] {
        var output: [UInt8] = []
        encodeValue(value, into: &output)
        return output
    }

    private static func appendLine(_ type: UInt8, _ text: [UInt8], to output: inout [UInt8]) {
        output.append(type)
        output.append(contentsOf: text)
        appendCRLF(to: &output)
    }

    private static func appendBulk(_ type: UInt8, _ bytes: [UInt8], to output: inout [UInt8]) {
        output.append(type)
        appendDecimal(bytes.count, to: &output)
        appendCRLF(to: &output)
        output.append(contentsOf: bytes)
        appendCRLF(to: &output)
    }

    private static func appendAggregate(
        _ type: UInt8, _ elements: [RESPValue], to output: inout [UInt8], pending: inout [RESPValue]
    ) {
        output.append(type)
        appendDecimal(elements.count, to: &output)
        appendCRLF(to: &output)
        pending.append(contentsOf: elements.reversed())
    }

    private static func appendCRLF(to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\r"))
        output.append(UInt8(ascii: "\n"))
    }

    /// Appends a non-negative count's decimal digits without allocating.
    private static func appendDecimal(_ value: Int, to output: inout [UInt8]) {
        precondition(value >= 0, "a count is never negative")
        var divisor = 1
        while divisor <= value / 10 { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            output.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    private static func decimalLength(_ value: Int) -> Int {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }
}
