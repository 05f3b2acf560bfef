#if Redis
import LMDBCache
import RESP

/// The commands a write becomes (the writer loop in RedisRemoteStore+Writing.swift decides when
/// they go): a pipeline of value and removal scripts, the tag scripts that run before it, a tag
/// removal or removal of everything with its lookups, and how each reply settles its write.
extension RedisRemoteStore {
    /// Runs `writes` (one pipeline, or a tag removal or removal of everything with its lookups)
    /// and says how each ended.
    func perform(_ writes: [RedisWrite]) async -> [WriteOutcome] {
        if writes.count == 1, writes[0].needsLookup {
            do {
                switch writes[0] {
                case .removeTag(let tag, let version):
                    try await removeTagged(tag, version: version)
                    try await publish(.tag, tag, version)
                case .removeAll(let version):
                    try await removeNamespace(version: version)
                    try await publish(.all, [], version)
                default:
                    break
                }
                return [.landed(published: true)]
            } catch let refusal as RedisWriteRefusal {
                return [.refused(refusal)]
            } catch {
                return [.failed(error)]
            }
        }
        let now = CacheChange.wallClockNow()
        // Settled before their values are sent: writes fenced out by a tag removal, or whose tag
        // scripts were refused or failed.
        var outcomes = await indexTags(of: writes, now: now)
        var commands: [RedisCommand] = []
        /// Each write's commands, which of them says whether it stored, and whether a 0 there
        /// means a newer write won (a value's script).
        var spans: [(write: Int, range: Range<Int>, decider: Int?, isValue: Bool)] = []
        for (index, write) in writes.enumerated() where outcomes[index] == nil {
            let start = commands.count
            var decider: Int?
            var isValue = false
            switch write {
            case .set(let key, let record, let keepUntil, _, let absentSince, let version, _):
                let expired = keepUntil != 0 && keepUntil <= now
                if expired {
                    // Expired before it was sent: as good as removed (a load's value: nothing to do).
                    if absentSince == nil {
                        decider = commands.count
                        commands.append(tombstone(key, version, publishing: true))
                    }
                    break
                }
                let valueKey = keys.value(key)
                let loadStart = absentSince.map { RecordVersion(milliseconds: $0).encoded } ?? []
                // The key outlives the value by a tombstone's life: a fence against older writes.
                let redisExpiry =
                    keepUntil == 0 ? 0 : max(keepUntil, now.addingReportingOverflow(tombstoneMilliseconds).partialValue)
                decider = commands.count
                isValue = true
                commands.append(
                    RedisCommand(
                        "EVAL", RedisScripts.write, Array("2".utf8), valueKey,
                        namespaceFence.key(beside: valueKey), version.encoded,
                        RedisEnvelope.storing(record, version: version, expires: keepUntil),
                        Array("\(redisExpiry)".utf8), keys.channel, change(.key, key, version), loadStart,
                        Array("\(now)".utf8), key: valueKey))
            case .remove(let key, let version):
                decider = commands.count
                commands.append(tombstone(key, version, publishing: true))
            case .discard(let key, let version):
                commands.append(tombstone(key, version, publishing: false))
            case .release(let key, let token):
                let leaseKey = keys.lease(key)
                commands.append(
                    RedisCommand("EVAL", RedisScripts.release, Array("1".utf8), leaseKey, token, key: leaseKey))
            case .removeTag, .removeAll:
                break  // on their own, above
            }
            spans.append((index, start..<commands.count, decider, isValue))
        }
        let replies: [RESPValue]
        do {
            replies = commands.isEmpty ? [] : try await execute(commands)
        } catch {
            return outcomes.map { $0 ?? .failed(error) }
        }
        for span in spans {
            outcomes[span.write] = {
                for index in span.range {
                    if case .error(let message) = replies[index] { return .refused(RedisWriteRefusal(message)) }
                }
                guard let decider = span.decider else { return .landed(published: false) }
                // 2: a retry whose first attempt stored the value (its reply was lost); that
                // attempt published it.
                if replies[decider] == .integer(1) || replies[decider] == .integer(2) { return .landed(published: true) }
                return span.isValue ? .superseded : .landed(published: false)
            }()
        }
        return outcomes.map { $0 ?? .landed(published: false) }
    }

    /// Runs the tag scripts of the values in `writes` that carry tags, before any value is sent:
    /// so a tag removal racing a write finds its key in the set, or fenced it out, or is older
    /// than it (``RedisScripts/tag``). Returns, by position in `writes`, the outcome of each write
    /// settled here: fenced when a later tag removal fenced it out (it must not land), refused or
    /// failed when its tag scripts were; nil for the others.
    func indexTags(of writes: [RedisWrite], now: UInt64) async -> [WriteOutcome?] {
        var outcomes = [WriteOutcome?](repeating: nil, count: writes.count)
        var commands: [RedisCommand] = []
        var spans: [(write: Int, range: Range<Int>)] = []
        for (index, write) in writes.enumerated() {
            guard case .set(let key, _, let keepUntil, let tags, _, let version, _) = write, !tags.isEmpty,
                keepUntil == 0 || keepUntil > now
            else { continue }
            let start = commands.count
            // When it was made: its version's ms (a load's value: its load's start, so a tag
            // removal made while the loader ran covers it, as it does in this process).
            let made = Array("\(version.milliseconds)".utf8)
            let life = Array("\(max(1, tombstoneMilliseconds))".utf8)
            for tag in tags {
                let tagKey = keys.tag(tag)
                commands.append(
                    RedisCommand(
                        "EVAL", RedisScripts.tag, Array("2".utf8), tagKey, tagVersionsKey(tag), key,
                        Array("\(keepUntil)".utf8), made, life, version.encoded, key: tagKey))
            }
            spans.append((index, start..<commands.count))
        }
        guard !commands.isEmpty else { return outcomes }
        let replies: [RESPValue]
        do {
            replies = try await execute(commands)
        } catch {
            for span in spans { outcomes[span.write] = .failed(error) }
            return outcomes
        }
        for span in spans {
            let answers = replies[span.range]
            if answers.contains(.integer(-1)) {
                outcomes[span.write] = .fenced
            } else if case .error(let message)? = answers.first(where: { if case .error = $0 { true } else { false } }) {
                outcomes[span.write] = .refused(RedisWriteRefusal(message))
            }
        }
        return outcomes
    }

    /// The script that leaves `key`'s tombstone of `version`, publishing the key's change or not.
    func tombstone(_ key: [UInt8], _ version: RecordVersion, publishing: Bool) -> RedisCommand {
        let valueKey = keys.value(key)
        return RedisCommand(
            "EVAL", RedisScripts.tombstone, Array("1".utf8), valueKey, version.encoded,
            RedisEnvelope.tombstone(version: version), Array("\(max(1, tombstoneMilliseconds))".utf8),
            publishing ? keys.channel : [], publishing ? change(.key, key, version) : [], key: valueKey)
    }

    /// A change this cache publishes, dated by its version's wall clock.
    func change(_ kind: CacheChange.Kind, _ subject: [UInt8], _ version: RecordVersion) -> [UInt8] {
        CacheChange(kind: kind, origin: origin, time: version.milliseconds, subject: subject).encoded
    }

    /// Publishes a tag removal or removal of everything once its keys are gone.
    private func publish(_ kind: CacheChange.Kind, _ subject: [UInt8], _ version: RecordVersion) async throws {
        let replies = try await execute([RedisCommand("PUBLISH", keys.channel, change(kind, subject, version))])
        try Self.checked(replies)
    }

    /// Throws the first error reply among `replies`.
    static func checked(_ replies: [RESPValue]) throws {
        for case .error(let message) in replies { throw RedisWriteRefusal(message) }
    }
}
#endif
