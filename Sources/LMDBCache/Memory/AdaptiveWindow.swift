import LMDBCacheStorage
import Synchronization

/// The share of a cache's capacity given to the ``MemoryCache/Policy/adaptive`` policy's window,
/// moved by hill climbing on the hit ratio: Caffeine's adaptation ("Adaptive Software Cache
/// Management", Einziger, Eytan, Friedman and Manes, Middleware 2018), with Caffeine's step, decay
/// and restart threshold. Where it departs from Caffeine (the sample's length and its floor) the
/// README's "The memory tier's policy" says why.
///
/// Lookups are counted in samples. After each sample the share moves one step: on in the same
/// direction while the hit ratio rose or held, back while it fell. Steps shrink by ``decay`` each
/// sample, so the share settles; a change in the hit ratio of ``restartThreshold`` or more (the
/// workload changed) restarts with a full step. A large window favours recency (LRU-like), a small
/// one frequency (the sketch decides more).
///
/// A sample lasts ``sampleLength`` capacities of lookups (at least ``minimumSampleLookups``, at
/// most ``WindowClimber/longestSampleLookups``): one while the step is full, lengthening as the
/// step decays, in inverse proportion to it, up to ten (Caffeine's sample, the sketch's halving
/// period). Short samples move a large cache early in a long workload; long ones filter
/// the noise once the share is close (the improvement Caffeine's author describes for large
/// caches, which Caffeine's fixed ten-capacity sample leaves slow: ScyllaDB pull request 29391,
/// April 2026).
@usableFromInline
struct AdaptiveWindow {
    /// The window's share when a cache starts: 1 % (Caffeine's; TinyLFU's paper found a 1 %
    /// window best on most traces, and the climber grows it where recency pays).
    @usableFromInline static var initialShare: Double { 0.01 }
    /// The largest share: 80 %. Caffeine's window grows only at the protected area's expense (80 %
    /// of the 99 % main area), so its window stops near 80 % too; probation keeps a fifth.
    @usableFromInline static var maximumShare: Double { 0.8 }
    /// A full step: 6.25 % of the capacity (Caffeine's).
    @usableFromInline static var fullStep: Double { 0.0625 }
    /// Each sample's step is this much of the last one (Caffeine's).
    @usableFromInline static var decay: Double { 0.98 }
    /// A change in the hit ratio this large restarts the climb with a full step: 5 points
    /// (Caffeine's).
    @usableFromInline static var restartThreshold: Double { 0.05 }
    /// The shortest sample, in capacities of lookups: one, the fewest in which a change of the
    /// window can have turned the cache over.
    @usableFromInline static var shortestSample: Double { 1 }
    /// The longest sample, in capacities of lookups: ten (Caffeine's, its sketch's sample period).
    @usableFromInline static var longestSample: Double { 10 }
    /// The fewest lookups in a sample, whatever the capacity: enough that the difference between
    /// two samples' hit ratios has a standard deviation of a third of ``restartThreshold`` at
    /// worst (independent lookups, hit ratio one half: 2 × ½ × ½ × (3 / 0.05)² = 1,800), so noise
    /// alone rarely restarts the climb of a small cache.
    @usableFromInline static var minimumSampleLookups: Double {
        2 * 0.25 * (3 / restartThreshold) * (3 / restartThreshold)
    }

    /// The window's current share of the capacity, 0 … ``maximumShare``.
    @usableFromInline var share = initialShare
    /// The next move, signed. As in Caffeine the first shrinks the window (from 1 %, to nothing):
    /// nearly free where frequency pays, and where recency pays the next sample shows the loss
    /// and turns the climb round.
    @usableFromInline var step = -fullStep
    /// The hit ratio of the last sample: 0 before the first, as in Caffeine, so the first sample
    /// always moves the share (by a full step, when its hit ratio is 5 % or more).
    @usableFromInline var previousHitRatio: Double = 0
    /// Samples ended, and the lookups they held (wrapping; for tests and diagnostics).
    @usableFromInline var samples = 0
    @usableFromInline var sampledLookups = 0

    @inlinable
    init() {}

    /// The current sample's length in capacities of lookups: ``fullStep`` over the step's size,
    /// within ``shortestSample`` … ``longestSample`` (a step decayed to nothing gives the longest).
    @inlinable
    var sampleLength: Double {
        let length = Self.fullStep / abs(step)
        return length.isNaN ? Self.longestSample : min(max(length, Self.shortestSample), Self.longestSample)
    }

    /// Ends a sample of `lookups` lookups of which `hits` hit; true when the share moved.
    @inlinable
    mutating func record(hits: Int, lookups: Int) -> Bool {
        guard lookups > 0 else { return false }
        samples &+= 1
        sampledLookups &+= lookups
        let ratio = min(max(Double(hits) / Double(lookups), 0), 1)
        let change = ratio - previousHitRatio
        previousHitRatio = ratio
        let move = change >= 0 ? step : -step
        if abs(change) >= Self.restartThreshold {
            // By the move's sign, not `move >= 0`: a step decayed to zero keeps its sign as ±0.
            step = move.sign == .plus ? Self.fullStep : -Self.fullStep
        } else {
            step = move * Self.decay
        }
        let moved = min(max(share + move, 0), Self.maximumShare)
        defer { share = moved }
        return moved != share
    }
}

/// One ``AdaptiveWindow`` for a whole cache, fed by all its shards, so the climber sees the
/// cache's hit ratio (a climber per shard would see samples a shard-count times shorter, or take
/// that many times longer to move).
///
/// A shard counts its own lookups under its lock and adds them here every sixteenth of its entries
/// (8 … 64 lookups; ``MemoryShard/sampleLookup(hit:)``), with one relaxed atomic addition
/// (hits and lookups packed in one word, so a sample's two counts are always read together): no
/// lock on the lookup path. A report that completes a sample takes the climber's lock (usually
/// one per sample; reports racing it find the sample ended and leave), moves the share and
/// publishes it in an atomic; each shard reads it at its next report.
@usableFromInline
final class WindowClimber: Sendable {
    private let window = Locked(AdaptiveWindow())
    /// The current sample's hits (high 32 bits) and lookups (low 32 bits).
    private let counts = Atomic<UInt64>(0)
    /// ``AdaptiveWindow/share``'s bits, published when it moves.
    private let shareBits = Atomic<UInt64>(AdaptiveWindow.initialShare.bitPattern)
    /// ``AdaptiveWindow/sampleLength``'s bits, published after each sample.
    private let sampleLengthBits = Atomic<UInt64>(AdaptiveWindow.shortestSample.bitPattern)
    /// The cache's count limit, if any.
    private let countLimit: Int?
    /// True when a cost limit may bind before the count limit.
    private let costBounded: Bool
    private let shards: Int

    /// Most lookups in a sample: 2^31, so a sample's counts fit their 32 bits with room for the
    /// reports that arrive while it ends (a cache of over 200 million entries samples less than
    /// ten capacities).
    static var longestSampleLookups: Double { Double(1 << 31) }

    /// A climber for a cache of `shards` shards with `countLimit` and, if `costBounded`, a cost
    /// limit. Its capacity in entries is the count limit, or, with a cost limit, the entries the
    /// cache holds (a reporting shard's entries, at least 32, times the shards) when fewer.
    @usableFromInline
    init(countLimit: Int?, costBounded: Bool, shards: Int) {
        self.countLimit = countLimit
        self.costBounded = costBounded
        self.shards = max(1, shards)
    }

    /// Adds a shard's `hits` and `misses`; `entries` is what that shard holds (for a cache
    /// bounded by cost). Returns the window's share, moved if the lookups ended a sample.
    @usableFromInline
    func report(hits: Int, misses: Int, entries: Int) -> Double {
        let hits = UInt64(min(max(hits, 0), 1 << 16))
        let lookups = hits + UInt64(min(max(misses, 0), 1 << 16))
        let total = counts.wrappingAdd(hits << 32 | lookups, ordering: .relaxed).newValue & 0xFFFF_FFFF
        var capacity = Double(countLimit ?? .max)
        if costBounded { capacity = min(capacity, Double(max(entries, 32)) * Double(shards)) }
        if Double(total) >= period(capacity: capacity, length: sampleLength) {
            window.withLock { window in
                // Against the length the lock protects: another report may have ended this sample
                // (and changed the length) while this one waited.
                let end = period(capacity: capacity, length: window.sampleLength)
                guard Double(counts.load(ordering: .relaxed) & 0xFFFF_FFFF) >= end else { return }
                let sample = counts.exchange(0, ordering: .relaxed)
                if window.record(hits: Int(sample >> 32), lookups: Int(sample & 0xFFFF_FFFF)) {
                    shareBits.store(window.share.bitPattern, ordering: .relaxed)
                }
                sampleLengthBits.store(window.sampleLength.bitPattern, ordering: .relaxed)
            }
        }
        return share
    }

    /// A sample's lookups for `capacity` entries and `length` capacities, within
    /// ``AdaptiveWindow/minimumSampleLookups`` … ``longestSampleLookups``.
    private func period(capacity: Double, length: Double) -> Double {
        min(max(max(capacity, 1) * length, AdaptiveWindow.minimumSampleLookups), Self.longestSampleLookups)
    }

    /// The window's current share.
    var share: Double { Double(bitPattern: shareBits.load(ordering: .relaxed)) }

    /// The current sample's length in capacities of lookups.
    var sampleLength: Double { Double(bitPattern: sampleLengthBits.load(ordering: .relaxed)) }

    /// The next step, signed (for tests and diagnostics).
    var step: Double { window.withLock { $0.step } }

    /// The last sample's hit ratio; 0 before the first ends (for tests and diagnostics).
    var previousHitRatio: Double { window.withLock { $0.previousHitRatio } }

    /// The samples ended so far and the lookups they held, and the lookups reported since the
    /// last (for tests and diagnostics).
    var sampled: (samples: Int, lookups: Int, pending: Int) {
        // Under the lock, where a sample ends: one consistent reading.
        window.withLock { ($0.samples, $0.sampledLookups, Int(counts.load(ordering: .relaxed) & 0xFFFF_FFFF)) }
    }
}
