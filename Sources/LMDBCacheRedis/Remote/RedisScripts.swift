#if Redis
/// The Lua scripts the tier runs in Redis (7.0 or later: `PEXPIRETIME`, script flags). Each
/// touches one key, or keys of one hash slot (a value key and the namespace's fence beside it, a
/// tag's set and its version hash), so in a cluster it runs on that slot's primary, and each publishes its change in
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
    private static let prelude = comparison + """
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

    /// `newer(a, b)`: whether version `a` is newer than `b`, each ``RecordVersion/encoded``.
    private static let comparison = """
        local function field(v, first, last) return tonumber(string.sub(v, first, last), 16) or -1 end
        local function newer(a, b)
          for _, range in ipairs({{1, 12}, {13, 16}, {17, 24}, {25, 32}}) do
            local x, y = field(a, range[1], range[2]), field(b, range[1], range[2])
            if x ~= y then return x > y end
          end
          return false
        end

        """

    /// Stores a value: KEYS[1] the value key, KEYS[2] the namespace's fence in its slot
    /// (``SlotKeys``); ARGV[1] the write's version, ARGV[2] the envelope,
    /// ARGV[3] the key's expiry in Redis (ms since 1970; '0': none), ARGV[4] the channel, ARGV[5]
    /// the change, ARGV[6] '' for a plain write, or for a set-if-absent the version of the load's
    /// start, ARGV[7] now (ms since 1970). A plain write stores, and publishes, only when ARGV[1]
    /// is newer than what the key holds (a foreign value is replaced) and than the last removal of
    /// everything; a set-if-absent only when the key holds no live record, and no tombstone or
    /// expired record newer than the load's start, and the load began after the last removal of
    /// everything. Returns 1 when it stored, 2 when the key holds this very write already (a retry
    /// whose first attempt ran and published: nothing is done again), else 0. Denied when Redis is
    /// out of memory (no flags: a script that may write).
    static let write = Array(
        ("#!lua\n" + prelude + """
        if kind == 'LCR1' and version == ARGV[1] then return 2 end
        local fence = redis.call('GET', KEYS[2])
        if fence and string.len(fence) == 32 then
          if not newer(ARGV[1], fence) then return 0 end
          if ARGV[6] ~= '' and not newer(ARGV[6], fence) then return 0 end
        end
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

    /// Fences the namespace before a removal of everything scans it: KEYS[1] a fence key
    /// (``SlotKeys``), ARGV[1] the removal's version, ARGV[2] how long the fence lasts (ms, a
    /// tombstone's life). A newer fence stays. Allowed when Redis is out of memory, as tombstones
    /// are. Returns 1 when it set the fence, else 0.
    static let namespaceFence = Array(
        ("#!lua flags=allow-oom\n" + comparison + """
        local current = redis.call('GET', KEYS[1])
        if current and string.len(current) == 32 and not newer(ARGV[1], current) then return 0 end
        redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
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
    /// life: ARGV[2], ms since 1970, or '0' for none), unless a later removal of the tag fenced it,
    /// and notes the write's version (ARGV[5]) as the member's in the tag's version hash (KEYS[2],
    /// in the set's slot: ``RedisRemoteStore/tagVersionsKey(_:)``) when it is the newest indexed.
    /// ARGV[3] is when the write was made (its version's ms; a load's value: the load's start),
    /// ARGV[4] a fence's life (ms). The fence is the member '' (no key can be: keys are never
    /// empty) scored by the ms of the tag's last removal; while it lasts, a write made in an
    /// earlier millisecond must not land (returns -1). A write made in the removal's own
    /// millisecond passes: this cache's writer sends its own changes in order, and a version's
    /// counter, which orders writes within a millisecond, is not in the fence. Run before the
    /// value's own script, so that a tag removal racing the write either finds the key in the set,
    /// fences it out, or is older than it; the version noted keeps a newer write's member in the
    /// set when an older removal unindexes the key after it (``unindex``). Members whose life
    /// ended by Redis's clock (`TIME`, so one machine's clock cannot trim for everyone) are trimmed
    /// on every add, with their versions, at most 256 at a time (so no add blocks Redis on a large
    /// backlog), so the set shrinks with its values instead of growing while the tag stays in use; a key written again keeps one member, with the later of its
    /// ends (`GT`: a late, older write does not shorten it). The set and the hash live as long as
    /// the longest-lived member, or the fence. Returns 1 when the member is new, 0 when it was there.
    /// Denied when Redis is out of memory (`#!lua`, no flags: refused before it runs, as the
    /// value's own script is, rather than growing the set for a value that cannot land).
    static let tag = Array(
        ("#!lua\n" + comparison + setExpiry + """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local fence = tonumber(redis.call('ZSCORE', KEYS[1], '') or '')
        local life = tonumber(ARGV[4]) or 0
        local before = '(' .. string.format('%.0f', now)
        for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', before, 'LIMIT', 0, 256)) do
          redis.call('ZREM', KEYS[1], member)
          if member ~= '' then redis.call('HDEL', KEYS[2], member) end
        end
        if fence and fence + life < now then fence = nil end
        if fence then redis.call('ZADD', KEYS[1], fence, '') end
        if fence and fence > (tonumber(ARGV[3]) or 0) then
          setExpiry(fence, life)
          return -1
        end
        local keep = tonumber(ARGV[2]) or 0
        local score = keep == 0 and '+inf' or ARGV[2]
        local added = redis.call('ZADD', KEYS[1], 'GT', score, ARGV[1])
        local indexed = redis.call('HGET', KEYS[2], ARGV[1])
        if not indexed or newer(ARGV[5], indexed) then redis.call('HSET', KEYS[2], ARGV[1], ARGV[5]) end
        setExpiry(fence, life)
        return added
        """).utf8)

    /// Fences a tag (KEYS[1], its sorted set; KEYS[2] its version hash) before its removal scans
    /// the set, and again after it (the set's life then follows what is left): the member ''
    /// scored ARGV[1], the removal's version's ms (a later fence stays), lasting ARGV[2] ms. A
    /// write carrying the tag made in an earlier millisecond then finds the fence and does not
    /// land (``tag``). Allowed when Redis is out of memory, as tombstones are. Returns 1.
    static let fence = Array(
        ("#!lua flags=allow-oom\n" + setExpiry + """
        local fence = tonumber(redis.call('ZSCORE', KEYS[1], '') or '')
        local mine = tonumber(ARGV[1]) or 0
        if not fence or mine > fence then fence = mine end
        redis.call('ZADD', KEYS[1], fence, '')
        setExpiry(fence, tonumber(ARGV[2]) or 0)
        return 1
        """).utf8)

    /// Takes keys a removal of a tag tombstoned off the tag: KEYS[1] its sorted set, KEYS[2] its
    /// version hash; ARGV[1] the removal's version, ARGV[2…] the keys. A key indexed by a write
    /// newer than the removal stays: that write's tag script ran between the removal's tombstone
    /// and this, and its value lands over the tombstone; taken off, it would be missed by the next
    /// removal of the tag. Allowed when Redis is out of memory: it frees. Returns how many keys
    /// it took off.
    static let unindex = Array(
        ("#!lua flags=allow-oom\n" + comparison + """
        local removed = 0
        for i = 2, #ARGV do
          local indexed = redis.call('HGET', KEYS[2], ARGV[i])
          if not indexed or not newer(indexed, ARGV[1]) then
            removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
            redis.call('HDEL', KEYS[2], ARGV[i])
          end
        end
        return removed
        """).utf8)

    /// `setExpiry(fence, life)`: sets the expiry of KEYS[1] (a tag's set) and KEYS[2] (its version
    /// hash) to the set's highest member's end of life, or the fence's end (`fence` + `life`) if
    /// later; none when a member lives forever.
    private static let setExpiry = """
        local function setExpiry(fence, life)
          local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
          if last[2] == nil then return end
          if last[2] == 'inf' or last[2] == '+inf' then
            redis.call('PERSIST', KEYS[1])
            redis.call('PERSIST', KEYS[2])
            return
          end
          local ending = tonumber(last[2])
          if fence and fence + life > ending then ending = fence + life end
          redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', ending))
          redis.call('PEXPIREAT', KEYS[2], string.format('%.0f', ending))
        end

        """

    /// Deletes the lease key only while it still holds the caller's token.
    static let release = Array(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end".utf8)
}
#endif
