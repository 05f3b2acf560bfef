#if Redis
import LMDBCache
import RESP

extension RedisRemoteStore {
    /// The key of `tag`'s version hash, in its sorted set's hash slot: `ns:tv:TAG` on one server,
    /// `ns:tv:{T}:TAG` in a cluster (``SlotKeys``). For each key in the set, the version of the
    /// newest write that indexed it (``RedisScripts/tag``, ``RedisScripts/unindex``).
    func tagVersionsKey(_ tag: [UInt8]) -> [UInt8] {
        tagVersions.key(beside: keys.tag(tag)) + Array(":".utf8) + tag
    }

    /// Removes the entries in `tag`'s sorted set, leaving each a tombstone of `version`, and
    /// removes them from the set, a page at a time (ZSCAN), so no reply or pipeline grows with the set: a set of
    /// any size is removed within bounded replies, each exchange under the command timeout.
    /// First the set is fenced (``RedisScripts/fence``): a write carrying the tag made in an
    /// earlier millisecond than the removal and not yet indexed when the scan passes is then
    /// refused by its tag script instead of landing after the scan. Members added meanwhile by older writes are
    /// removed too; newer ones stay, and so does a key a newer write indexed between its
    /// tombstone and its removal from the set (``RedisScripts/unindex``). Throws the first error
    /// reply (nothing is published then: the writer retries the whole removal).
    func removeTagged(_ tag: [UInt8], version: RecordVersion) async throws {
        let tagKey = keys.tag(tag)
        let versionsKey = tagVersionsKey(tag)
        let fence = RedisCommand(
            "EVAL", RedisScripts.fence, Array("2".utf8), tagKey, versionsKey, Array("\(version.milliseconds)".utf8),
            Array("\(max(1, tombstoneMilliseconds))".utf8), key: tagKey)
        try Self.checked(try await execute([fence]))
        var cursor: [UInt8] = Array("0".utf8)
        repeat {
            let replies = try await execute([
                RedisCommand("ZSCAN", tagKey, cursor, Array("COUNT".utf8), Array("1000".utf8), key: tagKey)
            ])
            try Self.checked(replies)
            guard case .array(let parts?)? = replies.first, parts.count == 2,
                case .bulkString(let next?) = parts[0], case .array(let pairs?) = parts[1]
            else { throw RedisClientError.protocolViolation("unexpected ZSCAN reply") }
            // Member, score, member, score, ...
            var members: [[UInt8]] = []
            for (index, value) in pairs.enumerated() where index % 2 == 0 {
                guard case .bulkString(let member?) = value else {
                    throw RedisClientError.protocolViolation("unexpected ZSCAN reply")
                }
                // The fence ('') is no key: it stays, and ends by its score.
                if !member.isEmpty { members.append(member) }
            }
            cursor = next
            guard !members.isEmpty else { continue }
            let tombstoned = try await execute(members.map { tombstone($0, version, publishing: false) })
            try Self.checked(tombstoned)
            // Unindexed only where the tombstone went in: a member whose key holds a newer write
            // (which may carry the tag again) stays for the next removal of the tag, and so does
            // one a newer write indexed since its tombstone (its value lands after it).
            let removed = zip(members, tombstoned).compactMap { $1 == .integer(1) ? $0 : nil }
            if !removed.isEmpty {
                let unindex =
                    [Array("EVAL".utf8), RedisScripts.unindex, Array("2".utf8), tagKey, versionsKey, version.encoded]
                    + removed
                try Self.checked(try await execute([RedisCommand(unindex, key: tagKey)]))
            }
        } while cursor != Array("0".utf8)
        // Again, for the set's life: it now follows the members left and the fence.
        try Self.checked(try await execute([fence]))
    }

    /// Removes every entry of the cache's namespace, and only those: the namespace is fenced
    /// (``SlotKeys``), then each value key (`ns:v:`) gets a tombstone of `version` (a newer
    /// write stays); other keys that share the prefix (another
    /// application's, another namespace's such as `ns2:` or `ns:v2:`) are left alone. Tag sets (and their version hashes) stay:
    /// a member whose value is gone costs the next removal of its tag an extra tombstone, and
    /// members are trimmed as their values' lives end. `SCAN` on each primary, then pipelines; a
    /// primary that does not answer fails the removal (the writer retries it).
    func removeNamespace(version: RecordVersion) async throws {
        // First the fence (one key, or one per slot in a cluster): a write older than this
        // removal that reaches Redis after its scan passed does not land (``RedisScripts/write``).
        let life = Array("\(max(1, tombstoneMilliseconds))".utf8)
        let fences = namespaceFence.everyKey()
        for start in stride(from: 0, to: fences.count, by: 1_024) {
            try Self.checked(
                try await execute(
                    fences[start..<min(start + 1_024, fences.count)].map { fence in
                        RedisCommand(
                            "EVAL", RedisScripts.namespaceFence, Array("1".utf8), fence, version.encoded, life,
                            key: fence)
                    }))
        }
        let pattern = Self.globEscaped(keys.value) + Array("*".utf8)
        for node in try await executor.everyPrimary() {
            var cursor: [UInt8] = Array("0".utf8)
            repeat {
                let replies = try await node.execute(
                    [RedisCommand("SCAN", cursor, Array("MATCH".utf8), pattern, Array("COUNT".utf8), Array("1000".utf8))],
                    timeout: timeout)
                try Self.checked(replies)
                guard replies.count == 1, case .array(let parts?) = replies[0], parts.count == 2,
                    case .bulkString(let next?) = parts[0], case .array(let found?) = parts[1]
                else { throw RedisClientError.protocolViolation("unexpected SCAN reply") }
                cursor = next
                let entryKeys = found.compactMap { value -> [UInt8]? in
                    guard case .bulkString(let name?) = value else { return nil }
                    return keys.entryKey(ofValueKey: name)
                }
                guard !entryKeys.isEmpty else { continue }
                try Self.checked(try await execute(entryKeys.map { tombstone($0, version, publishing: false) }))
            } while cursor != Array("0".utf8)
        }
    }

    /// `bytes` with the glob pattern's special characters escaped.
    static func globEscaped(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var escaped: [UInt8] = []
        for byte in bytes {
            if byte == UInt8(ascii: "*") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "[")
                || byte == UInt8(ascii: "]") || byte == UInt8(ascii: "\\")
            {
                escaped.append(UInt8(ascii: "\\"))
            }
            escaped.append(byte)
        }
        return escaped
    }
}
#endif
