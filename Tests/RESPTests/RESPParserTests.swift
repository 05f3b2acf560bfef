import Testing

@testable import RESP

/// Every value a parser returns from `bytes` given at once, and the error that ended them, if any.
func parseAll(_ bytes: [UInt8], limits: RESPParser.Limits = .init()) -> (values: [RESPValue], error: RESPParseError?) {
    var parser = RESPParser(limits: limits)
    parser.append(bytes)
    var values: [RESPValue] = []
    do {
        while let value = try parser.next() { values.append(value) }
    } catch {
        return (values, error)
    }
    return (values, nil)
}

/// The same, with the bytes appended in the given chunk sizes (cycled), pulling values after each.
func parseChunked(
    _ bytes: [UInt8], sizes: [Int], limits: RESPParser.Limits = .init()
) -> (values: [RESPValue], error: RESPParseError?) {
    var parser = RESPParser(limits: limits)
    var values: [RESPValue] = []
    var offset = 0
    var turn = 0
    repeat {
        let size = max(1, sizes[turn % sizes.count])
        turn += 1
        let end = min(bytes.count, offset + size)
        parser.append(bytes[offset..<end])
        offset = end
        do {
            while let value = try parser.next() { values.append(value) }
        } catch {
            return (values, error)
        }
    } while offset < bytes.count
    return (values, nil)
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite("RESP: the reply parser")
struct RESPParserTests {
    /// One wire form per case of RESPValue (and the forms that map onto them), with the value it is.
    static let samples: [(String, RESPValue)] = [
        ("+OK\r\n", .simpleString(bytes("OK"))),
        ("+\r\n", .simpleString([])),
        ("-ERR wrong type\r\n", .error(bytes("ERR wrong type"))),
        ("!21\r\nSYNTAX invalid syntax\r\n", .error(bytes("SYNTAX invalid syntax"))),
        (":0\r\n", .integer(0)),
        (":-42\r\n", .integer(-42)),
        (":+7\r\n", .integer(7)),
        (":9223372036854775807\r\n", .integer(.max)),
        (":-9223372036854775808\r\n", .integer(.min)),
        ("$5\r\nhello\r\n", .bulkString(bytes("hello"))),
        ("$0\r\n\r\n", .bulkString([])),
        ("$4\r\na\r\nb\r\n", .bulkString(bytes("a\r\nb"))),
        ("$-1\r\n", .bulkString(nil)),
        ("*-1\r\n", .array(nil)),
        ("*0\r\n", .array([])),
        ("*2\r\n$1\r\na\r\n:1\r\n", .array([.bulkString(bytes("a")), .integer(1)])),
        ("*2\r\n*1\r\n+x\r\n*0\r\n", .array([.array([.simpleString(bytes("x"))]), .array([])])),
        ("_\r\n", .null),
        ("#t\r\n", .boolean(true)),
        ("#f\r\n", .boolean(false)),
        (",1.5\r\n", .double(bytes("1.5"))),
        (",-2\r\n", .double(bytes("-2"))),
        (",1e+300\r\n", .double(bytes("1e+300"))),
        (",inf\r\n", .double(bytes("inf"))),
        (",-inf\r\n", .double(bytes("-inf"))),
        (",nan\r\n", .double(bytes("nan"))),
        (
            "(3492890328409238509324850943850943825024385\r\n",
            .bigNumber(bytes("3492890328409238509324850943850943825024385"))
        ),
        ("(-1\r\n", .bigNumber(bytes("-1"))),
        ("=15\r\ntxt:Some string\r\n", .verbatimString(format: bytes("txt"), text: bytes("Some string"))),
        ("=4\r\nmkd:\r\n", .verbatimString(format: bytes("mkd"), text: [])),
        (
            "%2\r\n+first\r\n:1\r\n+second\r\n_\r\n",
            .map([
                RESPPair(key: .simpleString(bytes("first")), value: .integer(1)),
                RESPPair(key: .simpleString(bytes("second")), value: .null),
            ])
        ),
        ("%0\r\n", .map([])),
        ("~2\r\n+a\r\n#f\r\n", .set([.simpleString(bytes("a")), .boolean(false)])),
        (
            ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nhey\r\n",
            .push([.bulkString(bytes("message")), .bulkString(bytes("ch")), .bulkString(bytes("hey"))])
        ),
        // Attributes are dropped: at the top, inside an aggregate, nested, and empty.
        ("|1\r\n+ttl\r\n:3600\r\n:7\r\n", .integer(7)),
        ("*2\r\n:1\r\n|1\r\n+key\r\n+v\r\n:2\r\n", .array([.integer(1), .integer(2)])),
        ("|1\r\n+a\r\n|1\r\n+b\r\n+c\r\n+d\r\n+value\r\n", .simpleString(bytes("value"))),
        ("|0\r\n+x\r\n", .simpleString(bytes("x"))),
    ]

    @Test("every type parses to its value, given at once", arguments: samples.indices)
    func parsesEveryType(index: Int) throws {
        let (wire, expected) = Self.samples[index]
        let result = parseAll(bytes(wire))
        #expect(result.error == nil)
        #expect(result.values == [expected])
    }

    @Test("split at every point, every sample still parses to its value", arguments: samples.indices)
    func everySplitPoint(index: Int) {
        let (wire, expected) = Self.samples[index]
        let all = bytes(wire)
        for split in 0...all.count {
            var parser = RESPParser()
            parser.append(all[..<split])
            var values: [RESPValue] = []
            while let value = try? parser.next() { values.append(value) }
            if split < all.count { #expect(values.isEmpty, "a value before its last byte, split at \(split)") }
            parser.append(all[split...])
            while let value = try? parser.next() { values.append(value) }
            #expect(values == [expected], "split at \(split)")
            #expect(parser.bufferedByteCount == 0)
        }
    }

    @Test("the whole sample stream byte by byte gives the same values as at once")
    func byteByByte() {
        let stream = Self.samples.flatMap { bytes($0.0) }
        let expected = Self.samples.map(\.1)
        #expect(parseAll(stream).values == expected)
        #expect(parseChunked(stream, sizes: [1]).values == expected)
        #expect(parseChunked(stream, sizes: [3, 1, 7, 2, 11]).values == expected)
    }

    @Test("every parsed value encodes back to bytes that parse to it", arguments: samples.indices)
    func valueRoundTrip(index: Int) {
        let value = Self.samples[index].1
        #expect(parseAll(RESPEncoder.encodeValue(value)).values == [value])
    }

    @Test("a command encodes as an array of bulk strings and parses back")
    func commandEncoding() {
        let command: [[UInt8]] = [bytes("SET"), [0, 13, 10, 255], [], bytes("PX"), bytes("1000")]
        let encoded = RESPEncoder.encodeCommand(command)
        #expect(encoded.count == RESPEncoder.encodedCommandLength(command))
        #expect(
            Array(encoded.prefix(17)) == bytes("*5\r\n$3\r\nSET\r\n$4\r\n")
        )
        #expect(parseAll(encoded).values == [.array(command.map { .bulkString($0) })])
        #expect(RESPEncoder.encodeCommand([]) == bytes("*0\r\n"))
        let long = [UInt8](repeating: 7, count: 1_234_567)
        let longEncoded = RESPEncoder.encodeCommand([long])
        #expect(Array(longEncoded.prefix(14)) == bytes("*1\r\n$1234567\r\n"))
        #expect(parseAll(longEncoded).values == [.array([.bulkString(long)])])
    }

    @Test("a large bulk string in many small chunks parses once, in linear time")
    func largeBulkInSmallChunks() {
        let payload = (0..<5_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let wire = bytes("$\(payload.count)\r\n") + payload + bytes("\r\n")
        // 5 MB in 100-byte chunks: a parser re-reading from the start each time would do 50,000
        // passes over megabytes (minutes); this finishes quickly only if the work is linear.
        let result = parseChunked(wire, sizes: [100])
        #expect(result.error == nil)
        #expect(result.values == [.bulkString(payload)])
    }

    @Test("a large array in small chunks keeps its finished elements")
    func largeArrayInSmallChunks() {
        let elements = (0..<100_000).map { RESPValue.integer(Int64($0)) }
        let wire = RESPEncoder.encodeValue(.array(elements))
        let result = parseChunked(wire, sizes: [5, 1, 13])
        #expect(result.error == nil)
        #expect(result.values == [.array(elements)])
    }

    @Test("a long simple string in small chunks is scanned once")
    func longLineInSmallChunks() {
        let text = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
        let wire = [UInt8(ascii: "+")] + text + bytes("\r\n")
        let result = parseChunked(wire, sizes: [64])
        #expect(result.values == [.simpleString(text)])
    }

    @Test("several replies in one read come out one by one, then nil")
    func pipelinedReplies() throws {
        var parser = RESPParser()
        parser.append(bytes("+OK\r\n:1\r\n$1\r\nx\r\n$3\r\nab"))
        #expect(try parser.next() == .simpleString(bytes("OK")))
        #expect(try parser.next() == .integer(1))
        #expect(try parser.next() == .bulkString(bytes("x")))
        #expect(try parser.next() == nil)
        #expect(parser.isMidValue)
        parser.append(bytes("c\r\n"))
        #expect(try parser.next() == .bulkString(bytes("abc")))
        #expect(try parser.next() == nil)
        #expect(!parser.isMidValue)
    }

    static let malformed: [(String, [UInt8], RESPParseError)] = [
        ("unknown type", bytes("?x\r\n"), .unknownType(UInt8(ascii: "?"))),
        ("a bare CRLF", bytes("\r\n"), .invalidLineEnding),
        ("LF without CR", bytes("+OK\n"), .invalidLineEnding),
        ("CR without LF", bytes("+O\rK\r\n"), .invalidLineEnding),
        ("bulk without its CRLF", bytes("$3\r\nabcde\r\n"), .invalidLineEnding),
        ("bulk ended by LF alone", bytes("$3\r\nabc\n\r"), .invalidLineEnding),
        ("negative bulk length", bytes("$-2\r\n"), .invalidLength),
        ("bulk length -0", bytes("$-0\r\n"), .invalidLength),
        ("signed bulk length", bytes("$+3\r\nabc\r\n"), .invalidLength),
        ("empty bulk length", bytes("$\r\n"), .invalidLength),
        ("letters in a length", bytes("$1a\r\n"), .invalidLength),
        ("negative array count", bytes("*-5\r\n"), .invalidLength),
        ("null map", bytes("%-1\r\n"), .invalidLength),
        ("null bulk error", bytes("!-1\r\n"), .invalidLength),
        ("null set", bytes("~-1\r\n"), .invalidLength),
        ("an overflowing bulk length", bytes("$99999999999999999999999999\r\n"), .bulkTooLong(.max)),
        ("a bulk length over 512 MiB", bytes("$536870913\r\n"), .bulkTooLong(536_870_913)),
        ("a huge array count", bytes("*999999999999\r\n"), .tooManyElements(999_999_999_999)),
        ("a map count over the limit", bytes("%1048577\r\n"), .tooManyElements(1_048_577)),
        ("integer overflow", bytes(":9223372036854775808\r\n"), .invalidInteger),
        ("integer underflow", bytes(":-9223372036854775809\r\n"), .invalidInteger),
        ("empty integer", bytes(":\r\n"), .invalidInteger),
        ("sign only", bytes(":-\r\n"), .invalidInteger),
        ("integer with a space", bytes(":1 2\r\n"), .invalidInteger),
        ("null with content", bytes("_x\r\n"), .invalidValue(type: UInt8(ascii: "_"))),
        ("boolean other than t/f", bytes("#x\r\n"), .invalidValue(type: UInt8(ascii: "#"))),
        ("empty boolean", bytes("#\r\n"), .invalidValue(type: UInt8(ascii: "#"))),
        ("double that is no number", bytes(",1.2.3\r\n"), .invalidValue(type: UInt8(ascii: ","))),
        ("double without digits", bytes(",.\r\n"), .invalidValue(type: UInt8(ascii: ","))),
        ("double with an empty exponent", bytes(",1e\r\n"), .invalidValue(type: UInt8(ascii: ","))),
        ("big number with letters", bytes("(12a\r\n"), .invalidValue(type: UInt8(ascii: "("))),
        ("verbatim without a format", bytes("=3\r\ntxt\r\n"), .invalidValue(type: UInt8(ascii: "="))),
        ("verbatim without its colon", bytes("=5\r\ntxt-x\r\n"), .invalidValue(type: UInt8(ascii: "="))),
        ("streamed string", bytes("$?\r\n;4\r\nHell\r\n;0\r\n"), .invalidLength),
        ("streamed aggregate", bytes("*?\r\n:1\r\n.\r\n"), .invalidLength),
        ("a streamed chunk", bytes(";4\r\nHell\r\n"), .unknownType(UInt8(ascii: ";"))),
        ("an error inside an array", bytes("*2\r\n:1\r\n:x\r\n"), .invalidInteger),
    ]

    @Test("malformed replies are refused, at once and byte by byte", arguments: malformed.indices)
    func malformedInput(index: Int) {
        let (name, wire, expected) = Self.malformed[index]
        #expect(parseAll(wire).error == expected, "\(name)")
        #expect(parseChunked(wire, sizes: [1]).error == expected, "\(name), byte by byte")
    }

    @Test("a parser that threw keeps throwing, whatever follows")
    func errorsAreSticky() throws {
        var parser = RESPParser()
        parser.append(bytes("+OK\r\n?\r\n+OK\r\n"))
        #expect(try parser.next() == .simpleString(bytes("OK")))
        #expect(throws: RESPParseError.unknownType(UInt8(ascii: "?"))) { try parser.next() }
        parser.append(bytes("+OK\r\n"))
        #expect(throws: RESPParseError.unknownType(UInt8(ascii: "?"))) { try parser.next() }
    }

    @Test("a 512 MiB bulk header is accepted and allocates nothing before its bytes arrive")
    func bulkAtTheLimitWaits() throws {
        var parser = RESPParser()
        parser.append(bytes("$536870912\r\nabc"))
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 3)
    }

    @Test("a huge aggregate header reserves no more than the bytes received could hold")
    func aggregateAtTheLimitWaits() throws {
        var parser = RESPParser()
        parser.append(bytes("*1048576\r\n:1\r\n"))
        #expect(try parser.next() == nil)
        parser.append(bytes("%1048576\r\n"))
        #expect(try parser.next() == nil)
    }

    @Test("nesting: 64 levels parse, 65 are refused, 100,000 are refused without recursing")
    func nestingDepth() {
        func nested(_ depth: Int) -> [UInt8] {
            Array(repeating: bytes("*1\r\n"), count: depth).flatMap { $0 } + bytes(":1\r\n")
        }
        var expected = RESPValue.integer(1)
        for _ in 0..<64 { expected = .array([expected]) }
        #expect(parseAll(nested(64)).values == [expected])
        #expect(parseAll(nested(65)).error == .nestingTooDeep)
        #expect(parseAll(nested(100_000)).error == .nestingTooDeep)
        // The parser itself does not recurse: a limit of 5,000 levels parses 5,000 (a value that deep
        // is still destroyed and compared recursively, which is why the default stays at 64).
        #expect(parseAll(nested(5_000), limits: RESPParser.Limits(maxDepth: 5_000)).values.count == 1)
        // Attributes count towards the depth too.
        #expect(parseAll(Array(repeating: bytes("|1\r\n"), count: 65).flatMap { $0 }).error == .nestingTooDeep)
    }

    @Test("configured limits: bulk length, element count, line length")
    func configuredLimits() {
        let limits = RESPParser.Limits(maxBulkLength: 10, maxAggregateCount: 3, maxLineLength: 8)
        #expect(parseAll(bytes("$10\r\n0123456789\r\n"), limits: limits).values == [.bulkString(bytes("0123456789"))])
        #expect(parseAll(bytes("$11\r\n"), limits: limits).error == .bulkTooLong(11))
        #expect(parseAll(bytes("*3\r\n:1\r\n:2\r\n:3\r\n"), limits: limits).values.count == 1)
        #expect(parseAll(bytes("*4\r\n"), limits: limits).error == .tooManyElements(4))
        #expect(parseAll(bytes("%4\r\n"), limits: limits).error == .tooManyElements(4))
        #expect(parseAll(bytes("+12345678\r\n"), limits: limits).values == [.simpleString(bytes("12345678"))])
        #expect(parseAll(bytes("+123456789\r\n"), limits: limits).error == .lineTooLong)
        // A line that never ends is refused once it passes the limit, not buffered forever.
        #expect(parseChunked(bytes("+123456789"), sizes: [1], limits: limits).error == .lineTooLong)
        #expect(parseAll(bytes("+12345678"), limits: limits).error == nil)
    }

    @Test("a consumed buffer is compacted: a long stream of replies keeps little buffered")
    func compaction() throws {
        var parser = RESPParser()
        for round in 0..<10_000 {
            parser.append(bytes("$5\r\nhel"))
            #expect(try parser.next() == nil)
            parser.append(bytes("lo\r\n:\(round)\r\n"))
            #expect(try parser.next() == .bulkString(bytes("hello")))
            #expect(try parser.next() == .integer(Int64(round)))
        }
        #expect(parser.bufferedByteCount == 0)
    }
}
