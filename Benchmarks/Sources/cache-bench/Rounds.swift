import BenchmarkData

// How repeats are run and compared: every round runs each system once, in an order drawn afresh
// for the round from the run's seed, with each system's deferred work drained (untimed) after its
// run; a system's ratio to LMDBCache is taken round by round, so drift that hits both runs of a
// round cancels, and the spread of those ratios says whether a difference is more than noise.

/// The order in which round `round` runs `count` systems: a permutation drawn from `seed` (the
/// run's `--seed`), `salt` (which workload) and the round.
func roundOrder(count: Int, round: Int, seed: UInt64, salt: UInt64) -> [Int] {
    var random = SplitMix64(seed: SplitMix64.mix(seed ^ SplitMix64.mix(salt &+ UInt64(round))))
    var order = Array(0..<count)
    order.shuffle(using: &random)
    return order
}

/// Runs `measure(system, round)` for every system in every one of `rounds` rounds, each round in
/// its own seeded order (a system with deferred work drains it, untimed, inside `measure`).
/// Returns each system's samples in round order.
func interleavedRounds(
    systems count: Int, rounds: Int, seed: UInt64, salt: UInt64,
    measure: (_ system: Int, _ round: Int) throws -> RunSample
) rethrows -> [[RunSample]] {
    var samples = [[RunSample]](repeating: [], count: count)
    for round in 0..<rounds {
        for system in roundOrder(count: count, round: round, seed: seed, salt: salt) {
            samples[system].append(try measure(system, round))
        }
    }
    return samples
}

/// A stable salt for a workload's name, so each workload gets its own orders.
func workloadSalt(_ text: String) -> UInt64 {
    text.utf8.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
}

extension [ResultRow] {
    /// Sets every row's ratio to the `LMDBCache` row (without a variant) of the same workload,
    /// threads, value size and capacity. Throughput rows: the median of the per-round ratios
    /// (each round's run over LMDBCache's run in the same round), with their min and max, and
    /// `withinNoise` when that range holds 1 (in some rounds faster, in others slower). Hit-rate
    /// rows: the hit ratios' quotient (a replay is exact; it has no noise).
    mutating func computeRatios() {
        for index in indices {
            let row = self[index]
            guard
                let reference = first(where: {
                    $0.isReference && $0.workload == row.workload
                        && $0.threads == row.threads && $0.valueBytes == row.valueBytes && $0.valueKind == row.valueKind
                        && $0.capacity == row.capacity
                })
            else { continue }
            if let hit = row.hitRatio, let referenceHit = reference.hitRatio, row.capacity != nil {
                self[index].ratioToLMDBCache = referenceHit > 0 ? hit / referenceHit : nil
                continue
            }
            let paired = zip(row.runsOpsPerSecond, reference.runsOpsPerSecond).compactMap { mine, theirs in
                theirs > 0 ? mine / theirs : nil
            }
            guard let low = paired.min(), let high = paired.max() else { continue }
            self[index].ratioToLMDBCache = paired.median
            self[index].ratioMin = low
            self[index].ratioMax = high
            self[index].withinNoise = row.isReference ? nil : low <= 1 && high >= 1
        }
    }
}
