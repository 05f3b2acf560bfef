import RESP

extension FuzzChecks {
    /// The RESP reply parser on arbitrary bytes: it never traps; delivered in chunks of sizes drawn
    /// from the input itself (so a failing input replays the same way), it returns the same values
    /// and the same error as given the bytes at once; every value it returns encodes back to bytes
    /// that parse to that value; and the input cut into arguments encodes as a command that parses
    /// back to those arguments.
    public static func resp(_ input: [UInt8]) -> [String] {
        var violations: [String] = []
        // Small limits, so the fuzzer reaches them with small inputs.
        let limits = RESPParser.Limits(maxBulkLength: 1_000, maxAggregateCount: 100, maxDepth: 8, maxLineLength: 200)
        let whole = parseRESP(input, limits: limits, chunkSizes: nil)
        let chunked = parseRESP(input, limits: limits, chunkSizes: chunkSizes(for: input))
        if whole.values != chunked.values {
            violations.append("chunked delivery gave \(chunked.values.count) values, at once \(whole.values.count)")
        }
        if whole.error != chunked.error {
            violations.append(
                "chunked delivery ended with \(String(describing: chunked.error)), at once with \(String(describing: whole.error))"
            )
        }
        for value in whole.values {
            let again = parseRESP(RESPEncoder.encodeValue(value), limits: limits, chunkSizes: nil)
            if again.values != [value] || again.error != nil {
                violations.append("a parsed value does not round-trip through the encoder")
            }
        }
        // The input as a command: arguments separated by 0xFF (so arguments may hold CR, LF, NUL).
        let arguments = input.split(separator: 0xFF, omittingEmptySubsequences: false).map { Array($0) }
        let command = RESPEncoder.encodeCommand(arguments)
        if command.count != RESPEncoder.encodedCommandLength(arguments) {
            violations.append("a command's encoded length is not the predicted one")
        }
        let parsedCommand = parseRESP(command, limits: RESPParser.Limits(), chunkSizes: chunkSizes(for: input))
        if parsedCommand.values != [.array(arguments.map { .bulkString($0) })] || parsedCommand.error != nil {
            violations.append("an encoded command does not parse back to its arguments")
        }
        return violations
    }

    /// Chunk sizes from 1 to 16 drawn from the input's bytes by a fixed generator.
    private static func chunkSizes(for input: [UInt8]) -> [Int] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for byte in input.prefix(64) { state = (state ^ UInt64(byte)) &* 0x100_0000_01B3 }
        return (0..<32).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(truncatingIfNeeded: (state >> 33) % 16) + 1
        }
    }

    /// Every value parsed from `bytes` (at once, or in `chunkSizes` cycled) and the error that ended them.
    private static func parseRESP(
        _ bytes: [UInt8], limits: RESPParser.Limits, chunkSizes: [Int]?
    ) -> (values: [RESPValue], error: RESPParseError?) {
        var parser = RESPParser(limits: limits)
        var values: [RESPValue] = []
        var offset = 0
        var turn = 0
        repeat {
            let size = chunkSizes.map { $0[turn % $0.count] } ?? bytes.count
            turn += 1
            let end = min(bytes.count, offset + max(size, 1))
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
}
