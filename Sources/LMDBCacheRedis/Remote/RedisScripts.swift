#if Redis
/// The Lua scripts the tier runs in Redis (7.0 or later: `PEXPIRETIME`, script flags). Each
/// touches one key, so in a cluster it runs on that key's primary, and each publishes its change in
/// the same script, after its write: no machine can hear of a change before the write it announces
/// is in Redis, on one node or in a cluster (PUBLISH from a script on any primary reaches every
/// subscriber of the cluster). A script Redis refuses (`-OOM`, `-READONLY`, `-LOADING`) writes
/// nothing and publishes nothing.
///
/// Versions are compared field by field (``RecordVersion/encoded``), as numbers, never as strings
/// (Lua's string order follows the server's locale).
enum RedisScripts {
    /// The helpers every versioned script starts with: what KEYS[1] holds (`kind`: nil when
    /// nothing, 'LCR1' a record, 'LCT1' a tombstone, 'foreign' anything else, another type
    /// included), its `version`, a record's end of life (`expires`, 0: none), and whether version
    /// `a` is newer than `b`.
    private static let prelude = """
        local function field(v, first, last) return tonumber(string.sub(v, first, last), 16) or -1 end
        local function newer(a, b)
          for _, range in ipairs({{1, 12}, {13, 16}, {17, 24}, {25, 32}}) do
            local x, y = field(a, range[1], range[2]), field(b, range[1], range[2])
            if x ~= y then return x > y end
          end
          return false
        end
        local current = redis.pcall('GET', KEYS[1])
        local kind, version, expires = nil, nil, 0
        if type(current) == 'table' then
          kind = 'foreign'
        elseif current then
          local magic = string.sub(current, 1, 4)
          if magic == 'LCR1' and string.len(current) >= 48 then
            kind, version, expires = magic, string.sub(current, 5, 36), field(current, 37, 48)
          elseif magic == 'LCT1' and string.len(current) == 36 then
            kind, version = magic, string.sub(current, 5, 36)
          else
            kind = 'foreign'
          end
        end

        """

    /// Stores a value: KEYS[1] the value key; ARGV[1] the write's version, ARGV[2] the envelope,
    /// ARGV[3] the key's expiry in Redis (ms since 1970; '0': none), ARGV[4] the channel, ARGV[5]
    /// the change, ARGV[6] '' for a plain write, or for a set-if-absent the version of the load's
    /// start, ARGV[7] now (ms since 1970). A plain write stores, and publishes, only when ARGV[1]
    /// is newer than what the key holds (a foreign value is replaced); a set-if-absent only when
    /// the key holds no live record, and no tombstone or expired record newer than the load's
    /// start. Returns 1 when it stored, else 0. Denied when Redis is out of memory (no flags: a
    /// script that may write).
    static let write = Array(
        ("#!lua\n" + prelude + """
        if version and not newer(ARGV[1], version) then return 0 end
        if ARGV[6] ~= '' and version then
          local live = kind == 'LCR1' and (expires == 0 or expires > tonumber(ARGV[7]))
          if live or not newer(ARGV[6], version) then return 0 end
        end
        if ARGV[3] == '0' then
          redis.call('SET', KEYS[1], ARGV[2])
        else
          redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[3])
        end
        redis.call('PUBLISH', ARGV[4], ARGV[5])
        return 1
        """).utf8)

    /// Removes a value, leaving a tombstone: KEYS[1] the value key; ARGV[1] the removal's version,
    /// ARGV[2] the tombstone, ARGV[3] how long it lasts (ms), ARGV[4] the channel ('' publishes
    /// nothing: a tag removal publishes once for all its keys), ARGV[5] the change. Leaves a newer
    /// value or tombstone alone (returns 0); replaces a record of its own version (the write it
    /// makes safe). Allowed when Redis is out of memory: a tombstone is small, and it is how a key
    /// is made safe when its value cannot be stored.
    static let tombstone = Array(
        ("#!lua flags=allow-oom\n" + prelude + """
        if version and newer(version, ARGV[1]) then return 0 end
        if kind == 'LCT1' and version == ARGV[1] then return 0 end
        redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
        if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], ARGV[5]) end
        return 1
        """).utf8)

    /// Indexes a key (ARGV[1]) under a tag (KEYS[1], a sorted set scored by each member's end of
    /// life: ARGV[2], ms since 1970, or '0' for none), unless a removal of the tag fenced it: ARGV[4]
    /// is the end of the fence this write would leave were it a removal (its version's ms plus a
    /// tombstone's life); a fence (member '', which no key can be: keys are never empty) lasting
    /// at least as long means a removal of the tag at least as new as this write, and the write
    /// must not land (returns -1). Run before the value's own script, so that a tag removal
    /// racing the write either finds the key in the set, fences it out, or is older than it.
    /// Members whose life ended by ARGV[3] (now) are trimmed on every add, the fence at its end
    /// too, so the set shrinks with its values instead of growing while the tag stays in use; a
    /// key written again keeps one member, with the later of its ends (`GT`: a late, older write
    /// does not shorten it). The set lives as long as its longest-lived member. Returns 1 when the
    /// member is new, 0 when it was there.
    static let tag = Array(
        ("""
        redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
        local fence = redis.call('ZSCORE', KEYS[1], '')
        if fence and tonumber(fence) >= (tonumber(ARGV[4]) or 0) then return -1 end
        local keep = tonumber(ARGV[2]) or 0
        local score = keep == 0 and '+inf' or ARGV[2]
        local added = redis.call('ZADD', KEYS[1], 'GT', score, ARGV[1])

        """ + expireWithLastMember + """
        return added
        """).utf8)

    /// Fences a tag (KEYS[1], its sorted set) before its removal scans the set: the member '' scored
    /// ARGV[1], the removal's version's ms plus a tombstone's life (a later fence stays). A write
    /// carrying the tag and older than the removal then finds the fence and does not land
    /// (``tag``). Allowed when Redis is out of memory, as tombstones are. Returns 1.
    static let fence = Array(
        ("#!lua flags=allow-oom\n" + """
        redis.call('ZADD', KEYS[1], 'GT', ARGV[1], '')

        """ + expireWithLastMember + """
        return 1
        """).utf8)

    /// Sets KEYS[1]'s expiry to its highest score (none when that is +inf).
    private static let expireWithLastMember = """
        local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
        if last[2] ~= nil then
          if last[2] == 'inf' or last[2] == '+inf' then
            redis.call('PERSIST', KEYS[1])
          else
            redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', tonumber(last[2])))
          end
        end

        """

    /// Deletes the lease key only while it still holds the caller's token.
    static let release = Array(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end".utf8)
}
#endif
