/// An incremental parser of the replies a Redis server sends, RESP2 and RESP3.
///
/// Feed it bytes as they arrive with ``append(_:)`` and pull complete values with ``next()``,
/// which returns nil while the next value is incomplete:
///
/// ```swift
/// var parser = RESPParser()
/// parser.append(bytesFromTheSocket)
/// while let value = try parser.next() { deliver(value) }
/// ```
///
/// Every byte is untrusted. Lengths and counts are parsed without trapping and checked against
/// ``Limits`` before anything is allocated for them; aggregates are parsed with an explicit stack
/// (no recursion), so nesting is bounded by ``Limits/maxDepth`` and not by the thread's stack; CRLF
/// is required where RESP puts it. RESP3 attributes (`|`) are parsed and dropped; bulk errors (`!`)
/// become ``RESPValue/error(_:)``; streamed strings and aggregates (`$?`, `*?`), which Redis does not
/// send, are refused.
///
/// Parsing is linear in the bytes received however they are split: an aggregate's finished elements
/// and a bulk string's header are kept while the rest arrives, and a line's terminator is searched
/// for only in the bytes not yet scanned.
///
/// Once ``next()`` has thrown, the stream is out of sync: every later call throws the same error.
package struct RESPParser: Sendable {
    /// The bounds a reply must stay within.
    package struct Limits: Sendable, Hashable {
        /// The longest bulk string, bulk error or verbatim string, in bytes. Default: 512 MiB,
        /// Redis's own `proto-max-bulk-len`.
        package var maxBulkLength: Int
        /// The most elements of one array, set or push, or pairs of one map or attribute.
        /// Default: 1,048,576.
        package var maxAggregateCount: Int
        /// The deepest nesting of aggregates (attributes included). Default: 64. The parser does not
        /// recurse, but a returned value is destroyed and compared recursively: keep this small.
        package var maxDepth: Int
        /// The longest line: a simple string, simple error, integer, double, big number or header,
        /// without its CRLF. Default: 1 MiB.
        package var maxLineLength: Int

        /// Limits with the given bounds; every default is Redis's or generous for its replies.
        package init(
            maxBulkLength: Int = 512 << 20, maxAggregateCount: Int = 1 << 20, maxDepth: Int = 64,
            maxLineLength: Int = 1 << 20
        ) {
            self.maxBulkLength = maxBulkLength
            self.maxAggregateCount = maxAggregateCount
            self.maxDepth = maxDepth
            self.maxLineLength = maxLineLength
        }
    }

    /// An aggregate whose elements are still arriving.
    private struct Frame: Sendable {
        enum Kind: Sendable { case array, set, push, map, attribute }
        var kind: Kind
        /// Elements still expected (a map's and an attribute's count twice their pairs).
        var remaining: Int
        var elements: [RESPValue]
    }

    /// A bulk value whose header has been read and whose payload is still arriving.
    private struct PendingBulk: Sendable {
        enum Kind: Sendable { case string, error, verbatim }
        var kind: Kind
        var length: Int
    }

    /// The bounds this parser enforces.
    package let limits: Limits
    /// Received bytes; those before `readIndex` are consumed.
    private var buffer: [UInt8] = []
    private var readIndex = 0
    /// How many bytes after `readIndex` are known to hold no CR or LF (the current line's search so far).
    private var lineScanned = 0
    private var stack: [Frame] = []
    private var pendingBulk: PendingBulk?
    private var failure: RESPParseError?

    /// A parser with no bytes yet, enforcing `limits` (default: ``Limits/init(maxBulkLength:maxAggregateCount:maxDepth:maxLineLength:)``'s).
    package init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Bytes received and not yet returned as part of a complete value (a value in progress included).
    package var bufferedByteCount: Int { buffer.count - readIndex }

    /// Whether a value is partly parsed: bytes are buffered or an aggregate or bulk is in progress.
    package var isMidValue: Bool { bufferedByteCount > 0 || !stack.isEmpty || pendingBulk != nil }

    /// Adds bytes received from the server.
    package mutating func append<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        if readIndex > 0 {
            if readIndex == buffer.count {
                // Keep a small buffer's storage for the next reply; let a large one go.
                buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 16)
                readIndex = 0
            } else if readIndex >= buffer.count - readIndex {
                // At least half consumed: moving the rest is paid for by the bytes consumed.
                buffer.removeSubrange(0..<readIndex)
                readIndex = 0
            }
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete value, or nil when more bytes are needed.
    ///
    /// - Throws: ``RESPParseError`` when the bytes are not valid RESP or exceed ``limits``; then again on
    ///   every later call.
    package mutating func next() throws(RESPParseError) -> RESPValue? {
        if let failure { throw failure }
        do {
            return try parseNext()
        } catch {
            failure = error
            throw error
        }
    }

    private mutating func parseNext() throws(RESPParseError) -> RESPValue? {
        while true {
            var value: RESPValue
            if let bulk = pendingBulk {
                guard buffer.count - readIndex >= bulk.length + 2 else { return nil }
                let end = readIndex + bulk.length
                guard buffer[end] == UInt8(ascii: "\r"), buffer[end + 1] == UInt8(ascii: "\n") else {
                    throw .invalidLineEnding
                }
                let payload = Array(buffer[readIndex..<end])
                readIndex = end + 2
                pendingBulk = nil
                switch bulk.kind {
                case .string: value = .bulkString(payload)
                case .error: value = .error(payload)
                case .verbatim:
                    guard payload.count >= 4, payload[3] == UInt8(ascii: ":") else {
                        throw .invalidValue(type: UInt8(ascii: "="))
                    }
                    value = .verbatimString(format: Array(payload[0..<3]), text: Array(payload[4...]))
                }
            } else {
                guard let line = try nextLine() else { return nil }
                let type = buffer[line.lowerBound]
                let content = (line.lowerBound + 1)..<line.upperBound
                switch type {
                case UInt8(ascii: "+"): value = .simpleString(Array(buffer[content]))
                case UInt8(ascii: "-"): value = .error(Array(buffer[content]))
                case UInt8(ascii: ":"): value = .integer(try integer(content))
                case UInt8(ascii: "_"):
                    guard content.isEmpty else { throw .invalidValue(type: type) }
                    value = .null
                case UInt8(ascii: "#"):
                    guard content.count == 1 else { throw .invalidValue(type: type) }
                    switch buffer[content.lowerBound] {
                    case UInt8(ascii: "t"): value = .boolean(true)
                    case UInt8(ascii: "f"): value = .boolean(false)
                    default: throw .invalidValue(type: type)
                    }
                case UInt8(ascii: ","):
                    guard Self.isDouble(buffer[content]) else { throw .invalidValue(type: type) }
                    value = .double(Array(buffer[content]))
                case UInt8(ascii: "("):
                    guard Self.isBigNumber(buffer[content]) else { throw .invalidValue(type: type) }
                    value = .bigNumber(Array(buffer[content]))
                case UInt8(ascii: "$"), UInt8(ascii: "!"), UInt8(ascii: "="):
                    let length = try self.length(content, nullAllowed: type == UInt8(ascii: "$"))
                    guard let length else {
                        value = .bulkString(nil)
                        break
                    }
                    guard length <= limits.maxBulkLength else { throw .bulkTooLong(length) }
                    let kind: PendingBulk.Kind =
                        switch type {
                        case UInt8(ascii: "$"): .string
                        case UInt8(ascii: "!"): .error
                        default: .verbatim
                        }
                    pendingBulk = PendingBulk(kind: kind, length: length)
                    continue
                case UInt8(ascii: "*"), UInt8(ascii: "~"), UInt8(ascii: ">"), UInt8(ascii: "%"), UInt8(ascii: "|"):
                    let count = try self.length(content, nullAllowed: type == UInt8(ascii: "*"))
                    guard let count else {
                        value = .array(nil)
                        break
                    }
                    guard count <= limits.maxAggregateCount else { throw .tooManyElements(count) }
                    let kind: Frame.Kind =
                        switch type {
                        case UInt8(ascii: "*"): .array
                        case UInt8(ascii: "~"): .set
                        case UInt8(ascii: ">"): .push
                        case UInt8(ascii: "%"): .map
                        default: .attribute
                        }
                    // Cannot overflow: count is at most maxAggregateCount, an Int.
                    let elements = kind == .map || kind == .attribute ? count * 2 : count
                    if elements == 0 {
                        guard let empty = Self.build(kind, []) else { continue }
                        value = empty
                        break
                    }
                    guard stack.count < limits.maxDepth else { throw .nestingTooDeep }
                    var storage: [RESPValue] = []
                    // Every element takes at least 3 bytes ("_\r\n"): reserve no more than those
                    // already received could hold.
                    storage.reserveCapacity(min(elements, (buffer.count - readIndex) / 3))
                    stack.append(Frame(kind: kind, remaining: elements, elements: storage))
                    continue
                default:
                    throw .unknownType(type)
                }
            }
            // Hand the value to the aggregates it completes; a value that completes the outermost is
            // a whole reply. A completed attribute yields nothing: the value it annotates follows.
            var completed: RESPValue? = value
            while let element = completed, !stack.isEmpty {
                let top = stack.count - 1
                stack[top].elements.append(element)
                stack[top].remaining -= 1
                if stack[top].remaining > 0 {
                    completed = nil
                } else {
                    let frame = stack.removeLast()
                    completed = Self.build(frame.kind, frame.elements)
                }
            }
            if stack.isEmpty, let completed { return completed }
        }
    }

    /// The value an aggregate's elements make; nil for an attribute, which is dropped.
    private static func build(_ kind: Frame.Kind, _ elements: [RESPValue]) -> RESPValue? {
        switch kind {
        case .array: return .array(elements)
        case .set: return .set(elements)
        case .push: return .push(elements)
        case .attribute: return nil
        case .map:
            var pairs: [RESPPair] = []
            pairs.reserveCapacity(elements.count / 2)
            var index = 0
            while index + 1 < elements.count {
                pairs.append(RESPPair(key: elements[index], value: elements[index + 1]))
                index += 2
            }
            return .map(pairs)
        }
    }

    /// The next line (type byte and content, without CRLF), consumed; nil when its CRLF has not arrived.
    private mutating func nextLine() throws(RESPParseError) -> Range<Int>? {
        let start = readIndex
        var index = start + lineScanned
        let end = buffer.count
        while index < end {
            let byte = buffer[index]
            if byte == UInt8(ascii: "\n") { throw .invalidLineEnding }
            if byte == UInt8(ascii: "\r") {
                guard index + 1 < end else { break }
                guard buffer[index + 1] == UInt8(ascii: "\n") else { throw .invalidLineEnding }
                // "\r\n" alone: a line without even a type byte.
                guard index > start else { throw .invalidLineEnding }
                readIndex = index + 2
                lineScanned = 0
                return start..<index
            }
            // Checked at every content byte (not once the line is whole) so a line without an end
            // cannot grow the buffer past the limit, and the error is the same however bytes arrive.
            guard index - start <= limits.maxLineLength else { throw .lineTooLong }
            index += 1
        }
        lineScanned = index - start
        return nil
    }

    /// A length or count: decimal digits, or "-1" (nil) where `nullAllowed`.
    private func length(_ range: Range<Int>, nullAllowed: Bool) throws(RESPParseError) -> Int? {
        if range.count == 2, buffer[range.lowerBound] == UInt8(ascii: "-"),
            buffer[range.lowerBound + 1] == UInt8(ascii: "1")
        {
            guard nullAllowed else { throw .invalidLength }
            return nil
        }
        guard !range.isEmpty else { throw .invalidLength }
        var value = 0
        for index in range {
            let digit = buffer[index] &- UInt8(ascii: "0")
            guard digit < 10 else { throw .invalidLength }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(Int(digit))
            // An overflowing length exceeds every limit; report it as the largest.
            if overflow1 || overflow2 { return Int.max }
            value = sum
        }
        return value
    }

    /// A `:` integer: an optional sign and decimal digits that fit `Int64`.
    private func integer(_ range: Range<Int>) throws(RESPParseError) -> Int64 {
        var index = range.lowerBound
        var negative = false
        if index < range.upperBound, buffer[index] == UInt8(ascii: "-") || buffer[index] == UInt8(ascii: "+") {
            negative = buffer[index] == UInt8(ascii: "-")
            index += 1
        }
        guard index < range.upperBound else { throw .invalidInteger }
        var value: Int64 = 0
        while index < range.upperBound {
            let digit = buffer[index] &- UInt8(ascii: "0")
            guard digit < 10 else { throw .invalidInteger }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            // Accumulated with the sign applied, so Int64.min parses.
            let (sum, overflow2) =
                negative
                ? times10.subtractingReportingOverflow(Int64(digit)) : times10.addingReportingOverflow(Int64(digit))
            guard !overflow1, !overflow2 else { throw .invalidInteger }
            value = sum
            index += 1
        }
        return value
    }

    /// RESP3 double text: `inf`, `-inf`, `nan` (any case, optional sign), or `[+-]digits[.digits][e[+-]digits]`.
    static func isDouble(_ text: ArraySlice<UInt8>) -> Bool {
        var rest = text[...]
        if let first = rest.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") { rest = rest.dropFirst() }
        let lowered = rest.map { $0 | 0x20 }
        if lowered == Array("inf".utf8) || lowered == Array("nan".utf8) { return true }
        var digits = 0
        while let byte = rest.first, byte &- UInt8(ascii: "0") < 10 {
            digits += 1
            rest = rest.dropFirst()
        }
        if rest.first == UInt8(ascii: ".") {
            rest = rest.dropFirst()
            while let byte = rest.first, byte &- UInt8(ascii: "0") < 10 {
                digits += 1
                rest = rest.dropFirst()
            }
        }
        guard digits > 0 else { return false }
        if let byte = rest.first, byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            rest = rest.dropFirst()
            if let sign = rest.first, sign == UInt8(ascii: "-") || sign == UInt8(ascii: "+") {
                rest = rest.dropFirst()
            }
            var exponentDigits = 0
            while let byte = rest.first, byte &- UInt8(ascii: "0") < 10 {
                exponentDigits += 1
                rest = rest.dropFirst()
            }
            guard exponentDigits > 0 else { return false }
        }
        return rest.isEmpty
    }

    /// RESP3 big number text: an optional sign and at least one decimal digit.
    static func isBigNumber(_ text: ArraySlice<UInt8>) -> Bool {
        var rest = text[...]
        if let first = rest.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") { rest = rest.dropFirst() }
        return !rest.isEmpty && rest.allSatisfy { $0 &- UInt8(ascii: "0") < 10 }
    }
}
