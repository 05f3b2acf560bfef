import Foundation

extension Cache {
    /// The limits of both tiers and how values are encoded for the disk.
    public struct Configuration: Sendable {
        /// The memory tier's limits. Its cost of an entry is the cost given on insert, else the
        /// weigher's, else the size of the encoded value (0 in a memory-only cache, which does not
        /// encode).
        public var memory: MemoryCache<Key, Value>.Configuration
        /// The disk tier's limits and durability. Unused by a memory-only cache.
        public var disk: DiskCache.Configuration
        /// Encodes values for the disk tier.
        public var codec: any ValueCodec<Value>
        /// When set, both tiers read the time from this clock (tests inject one they advance).
        public var clock: CacheClock?
        /// The value of the `cache` dimension on the cache's metrics; default: the directory's
        /// last path component, or `memory` for a memory-only cache.
        public var name: String?
        /// The freshness options of every get-or-load that passes none. Default: all off.
        public var freshness = Freshness()
        /// The clock ``Freshness/timeout`` and ``Freshness/hardTimeout`` are measured on. Default:
        /// `ContinuousClock`; tests inject one they advance.
        public var timeoutClock: any Clock<Duration> = ContinuousClock()
        /// How the memory tier follows changes other processes sharing the directory make.
        /// Default: the change log is read every 5 ms (``Coherence``).
        public var coherence = Coherence()
        /// A third level shared by several machines, between the disk tier and the loader, and
        /// the channel their caches tell each other of changes on (``RemoteTier``). Default: none.
        public var remote: RemoteTier?

        /// A configuration with the given tiers and codec.
        public init(
            memory: MemoryCache<Key, Value>.Configuration = .init(), disk: DiskCache.Configuration = .init(),
            codec: some ValueCodec<Value>
        ) {
            self.memory = memory
            self.disk = disk
            self.codec = codec
        }

        var memoryWithClock: MemoryCache<Key, Value>.Configuration {
            var memory = memory
            if let clock { memory.clock = clock }
            return memory
        }

        var diskWithClock: DiskCache.Configuration {
            var disk = disk
            if let clock { disk.clock = clock }
            return disk
        }
    }
}

extension Cache.Configuration where Value: Codable {
    /// A configuration that stores values as JSON (``JSONCodec``).
    public init(memory: MemoryCache<Key, Value>.Configuration = .init(), disk: DiskCache.Configuration = .init()) {
        self.init(memory: memory, disk: disk, codec: JSONCodec<Value>())
    }
}

extension Cache.Configuration where Value == [UInt8] {
    /// A configuration that stores byte arrays as they are (``BytesCodec``).
    public init(memory: MemoryCache<Key, Value>.Configuration = .init(), disk: DiskCache.Configuration = .init()) {
        self.init(memory: memory, disk: disk, codec: BytesCodec())
    }
}

extension Cache.Configuration where Value == Data {
    /// A configuration that stores `Data` as its bytes (``DataCodec``).
    public init(memory: MemoryCache<Key, Value>.Configuration = .init(), disk: DiskCache.Configuration = .init()) {
        self.init(memory: memory, disk: disk, codec: DataCodec())
    }
}

extension Cache.Configuration where Value == String {
    /// A configuration that stores strings as UTF-8 (``StringCodec``).
    public init(memory: MemoryCache<Key, Value>.Configuration = .init(), disk: DiskCache.Configuration = .init()) {
        self.init(memory: memory, disk: disk, codec: StringCodec())
    }
}
