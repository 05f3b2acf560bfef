/// How often keys were seen recently, approximately: a count-min sketch of 4-bit counters, the
/// popularity estimate of the ``MemoryCache/Policy/adaptive`` policy (one per shard).
///
/// Sixteen counters are packed in each `UInt64` word. A key has one counter in each of four rows,
/// all in one block of eight words (Caffeine's layout: an update touches one 64-byte stretch of
/// memory, not four scattered words). Its estimate is the least of the four, which never
/// under-counts (collisions only add) and rarely over-counts much. Counters saturate at 15:
/// enough to tell a one-hit wonder from a hot key.
/// After ``sampleSize`` counted additions every counter is halved, so popularity fades and the
/// sketch follows a changing workload (TinyLFU's reset).
///
/// The hash is seeded per sketch from the system's random source, so which keys collide differs
/// between instances and runs: an attacker cannot pick keys whose counts pile up on a victim's.
/// The table is allocated small and grows with the entries its shard holds
/// (``ensureCapacity(_:limit:)``), sized for at least twice them, up to the shard's count limit:
/// ten additions per key it is sized for between halvings, so the sample follows the cache's size.
@usableFromInline
struct FrequencySketch {
    @usableFromInline var words: [UInt64]
    /// `words.count` is `1 << wordBits`.
    @usableFromInline var wordBits: Int
    @usableFromInline let seed: UInt64
    /// Counted additions between two halvings: ten per key the sketch is sized for.
    @usableFromInline var sampleSize: Int
    /// The keys the sketch is sized for.
    @usableFromInline var capacity: Int
    /// Additions since the last halving (halved with the counters).
    @usableFromInline var additions = 0

    /// Most keys a sketch is sized for: 2^30 (8 GiB of counters, Caffeine's bound), far beyond
    /// any shard; it only keeps the arithmetic in range.
    @usableFromInline static var maximumCapacity: Int { 1 << 30 }

    /// A sketch for about `capacity` keys (clamped to 8 … ``maximumCapacity``): one word per key,
    /// rounded up to a power of two, and at least 64 words (512 bytes), so that even a shard of a
    /// few entries tells a newcomer from its popular keys.
    @inlinable
    init(capacity: Int, seed: UInt64) {
        let capacity = min(max(capacity, 8), Self.maximumCapacity)
        var bits = 6
        while 1 << bits < capacity { bits += 1 }
        wordBits = bits
        words = Array(repeating: 0, count: 1 << bits)
        self.seed = seed
        self.capacity = capacity
        sampleSize = 10 * capacity
    }

    /// Resizes the sketch for `keys` keys when it was sized for fewer, as Caffeine's sketch grows
    /// with the entries a cache holds (`ensureCapacity`): at least doubling, so a growing shard
    /// reallocates only a logarithmic number of times, and straight to `limit` once `keys` is half
    /// of it, so a shard that asks for twice its entries gets its last growth while a quarter to a
    /// half full (Caffeine sizes its sketch for the maximum at half full); never past `limit`. As
    /// in Caffeine the new table starts empty: counts gathered in a table too small for the keys
    /// are mostly collisions. Nothing when the sketch is empty (a shard that never evicts) or
    /// already large enough.
    @inlinable
    mutating func ensureCapacity(_ keys: Int, limit: Int = .max) {
        let target = min(keys >= limit / 2 ? limit : max(keys, 2 * capacity), limit, Self.maximumCapacity)
        guard !words.isEmpty, keys > capacity, target > capacity else { return }
        let grown = FrequencySketch(capacity: target, seed: seed)
        words = grown.words
        wordBits = grown.wordBits
        capacity = grown.capacity
        sampleSize = grown.sampleSize
        additions = 0
    }

    /// An empty sketch that allocates nothing, for a shard that never evicts.
    @inlinable
    init() {
        wordBits = 0
        words = []
        seed = 0
        capacity = 0
        sampleSize = .max
    }

    /// Counts one sighting of the key whose hash tag is `tag`.
    @inlinable
    mutating func increment(_ tag: UInt32) {
        guard !words.isEmpty else { return }
        let hash = mixed(tag)
        let block = blockStart(hash)
        // One uniqueness check for the four writes, not one each.
        let added = words.withUnsafeMutableBufferPointer { words in
            var added = false
            for row in 0..<4 {
                let (word, shift) = Self.position(hash, block: block, row: row)
                if (words[word] >> shift) & 0xF < 15 {
                    words[word] &+= 1 << shift
                    added = true
                }
            }
            return added
        }
        guard added else { return }
        additions += 1
        if additions >= sampleSize { halve() }
    }

    /// The estimated sightings of the key whose hash tag is `tag`, 0 … 15.
    @inlinable
    func frequency(_ tag: UInt32) -> Int {
        guard !words.isEmpty else { return 0 }
        let hash = mixed(tag)
        let block = blockStart(hash)
        var least: UInt64 = 15
        for row in 0..<4 {
            let (word, shift) = Self.position(hash, block: block, row: row)
            least = min(least, (words[word] >> shift) & 0xF)
        }
        return Int(least)
    }

    /// Halves every counter (rounding down), so old popularity fades.
    @inlinable
    mutating func halve() {
        var odd = 0
        for index in words.indices {
            odd += (words[index] & 0x1111_1111_1111_1111).nonzeroBitCount
            words[index] = (words[index] >> 1) & 0x7777_7777_7777_7777
        }
        // Each addition raised four counters; the dropped halves of odd ones were a quarter each.
        additions = max(0, (additions - odd / 4) / 2)
    }

    // MARK: Hashing

    /// The tag scrambled with the seed (SplitMix64's finaliser: every input bit moves every
    /// output bit).
    @inlinable @inline(__always)
    func mixed(_ tag: UInt32) -> UInt64 {
        var x = (UInt64(tag) | UInt64(tag) << 32) ^ seed
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        return x ^ (x >> 31)
    }

    /// The first word of `hash`'s block of eight (64 bytes; the array's storage is 16-byte
    /// aligned, so one or two cache lines): the top bits of the hash times an odd constant, so an
    /// increment or an estimate touches one line.
    @inlinable @inline(__always)
    func blockStart(_ hash: UInt64) -> Int {
        Int(truncatingIfNeeded: (hash &* 0x9E37_79B9_7F4A_7C15) >> UInt64(67 - wordBits)) << 3
    }

    /// Row `row`'s counter for `hash` in the block starting at `block`: row `r` uses word `2r` or
    /// `2r + 1` of the block and one of its sixteen counters, each chosen by bits of the hash of
    /// their own.
    @inlinable @inline(__always)
    static func position(_ hash: UInt64, block: Int, row: Int) -> (word: Int, shift: UInt64) {
        let word = block | (row << 1) | Int(truncatingIfNeeded: (hash >> UInt64(row)) & 1)
        let counter = (hash >> UInt64(8 + (row << 2))) & 15
        return (word, counter << 2)
    }
}
