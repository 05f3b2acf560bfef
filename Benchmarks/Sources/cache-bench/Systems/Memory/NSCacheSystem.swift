import Foundation

/// Foundation's `NSCache` (swift-corelibs-foundation on Linux), as a Swift user would adopt it
/// for `[UInt8]` values: NSString keys and a wrapper class, since both must be objects.
final class NSCacheSystem: MemorySystem, @unchecked Sendable {
    static let name = "NSCache"
    static let summary =
        "Foundation NSCache<NSString, Box> (Box: a final class holding the [UInt8]), countLimit = entries; "
        + "NSString keys pre-built; each set allocates its Box, as NSCache's object values require"

    /// NSCache values must be objects.
    final class Box {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
    }

    // NSCache is documented as thread-safe (corelibs guards it with an NSLock).
    private let cache = NSCache<NSString, Box>()

    init(capacity: Int) {
        cache.countLimit = capacity
    }

    static func makeKey(_ key: String) -> NSString { NSString(string: key) }

    @inline(__always)
    func get(_ key: NSString) -> [UInt8]? { cache.object(forKey: key)?.bytes }

    @inline(__always)
    func set(_ value: [UInt8], forKey key: NSString) { cache.setObject(Box(value), forKey: key) }

    /// NSCache has no count.
    var count: Int? { nil }
}
