import Foundation
import LMDBCache

/// What the fuzz targets under `Fuzz/` check of one input, as functions the unit tests call too:
/// an input that once broke a check stays in `FuzzRegressionTests`. Each returns the invariants
/// `input` violated (empty when none); decoding must also never crash.
public enum FuzzChecks {
    /// The record decoder on arbitrary stored bytes, then a round trip of the input as a value.
    public static func record(_ input: [UInt8]) -> [String] {
        var violations: [String] = []
        let storedKey = Array(input.prefix(3))
        input.withUnsafeBytes { bytes in
            guard let header = try? Record.validate(bytes) else { return }
            if (try? Record.validate(bytes, storedKey: storedKey)) != nil && header.version >= 2
                && header.keyTag != Record.keyTag(storedKey)
            {
                violations.append("validate(storedKey:) accepted a record with another key's tag")
            }
            if let fullKey = Record.fullKey(bytes, header: header), fullKey.count != header.keyLength {
                violations.append("the full key has \(fullKey.count) bytes, the header says \(header.keyLength)")
            }
            if let value = try? Record.value(bytes, header: header), value.count != header.valueLength {
                violations.append("a value of \(value.count) bytes decoded from a header saying \(header.valueLength)")
            }
        }
        // The input as a value under a key made of its first bytes: encodes, validates, decodes back.
        guard let key = try? StorageKey(input.isEmpty ? [0] : Array(input.prefix(600))) else {
            return violations + ["a non-empty key was refused"]
        }
        let record = input.withUnsafeBytes {
            Record.encode(value: $0, key: key, now: 1, expires: 0, threshold: 16, level: 1)
        }
        record.withUnsafeBytes { bytes in
            guard let header = try? Record.validate(bytes, storedKey: key.bytes) else {
                violations.append("a freshly encoded record does not validate")
                return
            }
            if !Record.matches(bytes, header: header, key: key) {
                violations.append("a freshly encoded record does not match its key")
            }
            if (try? Record.value(bytes, header: header)) != input {
                violations.append("a freshly encoded record does not decode to its value")
            }
        }
        return violations
    }

    /// The key codec: ``StorageKey`` and every built-in ``CacheKey``'s `init?(cacheKeyBytes:)`.
    public static func key(_ input: [UInt8]) -> [String] {
        var violations: [String] = []
        if input.isEmpty {
            if (try? StorageKey(input)) != nil { violations.append("an empty key was accepted") }
        } else if let stored = try? StorageKey(input) {
            if stored.key != input { violations.append("StorageKey does not give back its key") }
            if stored.bytes.count > StorageKey.directLimit {
                violations.append("a stored key of \(stored.bytes.count) bytes exceeds \(StorageKey.directLimit)")
            }
            if input.count <= StorageKey.directLimit
                ? stored.bytes != input || stored.fullKey != nil
                : stored.fullKey != input
                    || Array(stored.bytes.prefix(StorageKey.prefixLength))
                        != Array(input.prefix(StorageKey.prefixLength))
            {
                violations.append("a key of \(input.count) bytes is stored in the wrong form")
            }
            if StorageKey(stored: stored.bytes, fullKey: stored.fullKey) != stored {
                violations.append("a stored key read back is not the same key")
            }
        } else {
            violations.append("a non-empty key was refused")
        }
        let string = String(cacheKeyBytes: input)
        // A String key is stored as its NFC form: bytes in NFC come back as they are, others as
        // their NFC, and those bytes name an equal string.
        if let string, string.cacheKeyBytes != Array(string.precomposedStringWithCanonicalMapping.utf8) {
            violations.append("String's key bytes are not the UTF-8 of its NFC form")
        }
        if let string, String(cacheKeyBytes: string.cacheKeyBytes) != string {
            violations.append("String does not round-trip its key bytes")
        }
        if (string == nil) == (String(validating: input, as: UTF8.self) != nil) {
            violations.append("String(cacheKeyBytes:) disagrees with UTF-8 validation")
        }
        let integer = Int(cacheKeyBytes: input)
        if (integer != nil) != (input.count == 8) || integer.map({ $0.cacheKeyBytes != input }) == true {
            violations.append("Int does not round-trip exactly its 8-byte form")
        }
        let uuid = UUID(cacheKeyBytes: input)
        if (uuid != nil) != (input.count == 16) || uuid.map({ $0.cacheKeyBytes != input }) == true {
            violations.append("UUID does not round-trip exactly its 16-byte form")
        }
        if [UInt8](cacheKeyBytes: input) != input { violations.append("[UInt8] keys are not their own bytes") }
        return violations
    }
}

/// The plumbing every fuzz target shares: its `main` hands libFuzzer a callback (built by
/// `scripts/fuzz` with `-DFUZZING`), or, in a plain build, replays the files named on the command line.
public enum FuzzTarget {
    /// A libFuzzer callback: one input, 0 back.
    public typealias Callback = @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32

    /// Runs `check` on one input and traps on a violation, so the fuzzer keeps the input.
    public static func run(_ check: ([UInt8]) -> [String], _ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        let violations = check(input)
        if !violations.isEmpty { fatalError("fuzz check failed: \(violations.joined(separator: "; "))") }
        return 0
    }

    /// The target's whole program: libFuzzer's driver over `callback` when built for fuzzing,
    /// else `callback` over each file named on the command line (a crash input to reproduce).
    public static func main(_ callback: Callback) -> Never {
        #if FUZZING
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(LLVMFuzzerRunDriver(&argc, &argv, callback))
        #else
            for path in CommandLine.arguments.dropFirst() {
                guard let data = FileManager.default.contents(atPath: path) else {
                    print("\(path): cannot read")
                    exit(1)
                }
                _ = [UInt8](data).withUnsafeBufferPointer { callback($0.baseAddress, $0.count) }
                print("\(path): ok")
            }
            exit(0)
        #endif
    }
}

#if FUZZING
    /// libFuzzer's driver for programs that keep their own `main` (SwiftPM names an executable's entry
    /// point itself, so libFuzzer's `main` cannot be used).
    @_silgen_name("LLVMFuzzerRunDriver")
    private func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: FuzzTarget.Callback
    ) -> Int32
#endif
