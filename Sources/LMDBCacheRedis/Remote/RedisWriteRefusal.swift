#if Redis
/// An error reply Redis gave to a write: the write did not land.
struct RedisWriteRefusal: Error, CustomStringConvertible {
    /// The reply's text (untrusted: shown, never parsed beyond its first word).
    let message: String

    init(_ bytes: [UInt8]) {
        message = String(decoding: bytes.prefix(512), as: UTF8.self)
    }

    /// The reply's error code: its first word (`OOM`, `LOADING`, ...).
    var code: Substring { message.prefix { $0 != " " } }

    /// Redis is out of memory (`maxmemory` with `noeviction`): a value will not land until memory
    /// is freed, a tombstone (allowed when out of memory) will.
    var isOutOfMemory: Bool { code == "OOM" || message.contains("OOM command not allowed") }

    /// A state Redis leaves by itself (memory freed, loading done, failover over, script
    /// killed): retried with backoff. Anything else (`WRONGTYPE`, `ERR`, `NOPERM`) would be
    /// refused again: dropped at once.
    var isTransient: Bool {
        if isOutOfMemory { return true }
        return Self.transientCodes.contains(code)
            || Self.transientCodes.contains { message.contains("-\($0) ") || message.contains(" \($0) ") }
    }

    /// Redis cannot serve anything now (still loading its data, a script running, no primary
    /// for the slot): the exchange counts as a failure for the circuit, as a timeout does. An
    /// `-OOM`, `-READONLY` or `-MISCONF` node still serves reads: not a failure there.
    var meansUnavailable: Bool { Self.unavailableCodes.contains(code) }

    private static let unavailableCodes: Set<Substring> = ["LOADING", "BUSY", "CLUSTERDOWN", "MASTERDOWN"]

    private static let transientCodes: Set<Substring> = [
        "LOADING", "READONLY", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "NOREPLICAS", "MISCONF",
        "NOTREADY",
    ]

    var description: String { "Redis refused a write: \(message)" }
}
#endif
