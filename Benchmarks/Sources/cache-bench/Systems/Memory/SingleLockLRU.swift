import Synchronization

/// The classic LRU cache YYMemoryCache (and many hand-written Swift caches) use: one mutex over
/// a hash map from key to a class node in a doubly linked list, most recently used at the head.
/// A get moves its node to the head; an insert over the count limit evicts the tail.
///
/// The lock is `Synchronization.Mutex`, as in ``LockedDictionary``: it is what a Swift user
/// reaches for today (and it is faster and steadier than NSLock here), so the peers differ from
/// LMDBCache in structure, not in lock primitive.
final class SingleLockLRU: MemorySystem {
    static let name = "SingleLockLRU"
    static let summary =
        "one Mutex over Dictionary<String, Node> + doubly linked list of class nodes (YYMemoryCache's design)"

    /// A list node. The map owns the nodes; the links are unowned(unsafe), like YYMemoryCache's
    /// __unsafe_unretained links, so relinking costs no reference counting.
    final class Node: @unchecked Sendable {
        let key: String
        var value: [UInt8]
        unowned(unsafe) var previous: Node?
        unowned(unsafe) var next: Node?

        init(key: String, value: [UInt8]) {
            self.key = key
            self.value = value
        }
    }

    struct State: ~Copyable {
        var map: [String: Node] = [:]
        unowned(unsafe) var head: Node?
        unowned(unsafe) var tail: Node?

        mutating func unlink(_ node: Node) {
            if let previous = node.previous { previous.next = node.next } else { head = node.next }
            if let next = node.next { next.previous = node.previous } else { tail = node.previous }
            node.previous = nil
            node.next = nil
        }

        mutating func pushFront(_ node: Node) {
            node.next = head
            head?.previous = node
            head = node
            if tail == nil { tail = node }
        }

        mutating func moveToFront(_ node: Node) {
            guard head !== node else { return }
            unlink(node)
            pushFront(node)
        }
    }

    private let state = Mutex(State())
    private let countLimit: Int

    init(capacity: Int) {
        countLimit = capacity
        state.withLock { $0.map.reserveCapacity(capacity) }
    }

    static func makeKey(_ key: String) -> String { key }

    func get(_ key: String) -> [UInt8]? {
        state.withLock { state in
            guard let node = state.map[key] else { return nil }
            state.moveToFront(node)
            return node.value
        }
    }

    func set(_ value: [UInt8], forKey key: String) {
        let evicted: Node? = state.withLock { state in
            if let node = state.map[key] {
                node.value = value
                state.moveToFront(node)
                return nil
            }
            let node = Node(key: key, value: value)
            state.map[key] = node
            state.pushFront(node)
            guard state.map.count > countLimit, let last = state.tail else { return nil }
            state.unlink(last)
            // Keep the node alive past the unlock, as YYMemoryCache releases evicted nodes
            // outside its lock.
            return state.map.removeValue(forKey: last.key)
        }
        _ = evicted
    }

    var count: Int? { state.withLock { $0.map.count } }
}
